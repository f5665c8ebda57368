"""A command that wrote records prints one id to pass to `evosyn show` (and the query that lists the others),
and the id it prints is one `evosyn show` finds."""
from __future__ import annotations

import re

from evosyn.flows.cli_run import print_next
from tests.flows.test_cli import evosyn

SHOW = re.compile(r"^  evosyn (?:--home \S+ )?show (\S+)   # a verified conversation; more ids: evosyn .*query \"select "
                  r"trajectory_id, task_id, passed from verdicts where run_id = '(\S+)' limit 20\"$", re.M)


def test_synth_and_the_run_summary_print_an_id_that_show_finds(tmp_path, capsys, monkeypatch):
    home = tmp_path / "h"
    out = evosyn("synth", "--domain", "airline", "--n", "4", home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    found = SHOW.search(out.stdout)
    assert found and found.group(2) == "synth-airline-s0-n4", out.stdout
    shown = evosyn("show", found.group(1), home=home)
    assert shown.returncode == 0 and f"trajectory {found.group(1)}" in shown.stdout, shown.stdout + shown.stderr
    q = evosyn("query", SHOW.search(out.stdout).group(0).split("query ", 1)[1].strip('"'), home=home)
    assert q.returncode == 0 and found.group(1) in q.stdout, q.stdout + q.stderr  # the printed query runs
    # a run's summary names one of its conversations the same way (here the pass's store and id)
    monkeypatch.setenv("EVOSYN_HOME", str(home))
    print_next("synth-airline-s0-n4", str(home))
    said = capsys.readouterr().out
    assert SHOW.search(said) and SHOW.search(said).group(2) == "synth-airline-s0-n4", said
