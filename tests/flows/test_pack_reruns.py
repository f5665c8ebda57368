"""A user's pack's code is part of what a run id covers: a rerun after an edit of the pack is a new run (or
pass) and one line names the change; ``--reuse`` continues the earlier one. Built-in packs' ids are as they were."""
from __future__ import annotations

import re

import pytest

from evosyn.config import load_config
from evosyn.envs.pack_version import folder_digest, user_pack_version
from evosyn.flows.run_id import run_id_for
from tests.flows.test_cli_new_domain import edit, evosyn, new_domain

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

NOTE = re.compile(r"^note: pack (\w+) changed since (run|pass) (\S+) \(code (\w{6}) -> (\w{6})\): this is \2 (\S+); "
                  r"--reuse continues \3$", re.M)


def _pass_id(stdout: str) -> str:
    found = re.search(r"run (synth-\S+): \d+ of \d+ blueprints", stdout)
    assert found, stdout
    return found.group(1)


def test_the_digest_covers_code_and_data_and_skips_pycache(tmp_path):
    (tmp_path / "pack.py").write_text("x = 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "db.json").write_text("{}")
    first = folder_digest(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "pack.cpython-312.pyc").write_bytes(b"\0\1")
    assert folder_digest(tmp_path) == first
    (tmp_path / "data" / "db.json").write_text("{\"pets\": []}")
    assert folder_digest(tmp_path) != first
    (tmp_path / "data" / "db.json").write_text("{}")
    assert folder_digest(tmp_path) == first
    (tmp_path / "data" / "db.json").rename(tmp_path / "data" / "db2.json")  # a renamed file is another pack
    assert folder_digest(tmp_path) != first


def test_built_in_run_ids_are_as_they_were():
    # the main job's ids (and so its rows) stay: a built-in pack's version is evosyn's own
    cfg = load_config(None, overrides={"domain": "airline", "rounds": 1, "budget": 12, "test_size": 10})
    assert run_id_for(cfg) == "airline-evosyn-s0-1eeba1"
    assert run_id_for(load_config(None, overrides={"domain": "airline"})) == "airline-evosyn-s0-8e0d7e"
    assert run_id_for(load_config(None, overrides={"domain": "retail"})) == "retail-evosyn-s0-11bf0b"
    assert user_pack_version("airline") is None


def test_a_user_pack_edit_changes_the_run_id(tmp_path, monkeypatch):
    packs, folder = new_domain(tmp_path, "gym_ids")
    monkeypatch.setenv("EVOSYN_DOMAINS", str(packs))
    cfg = load_config(None, overrides={"domain": "gym_ids", "rounds": 1, "budget": 12})
    before = run_id_for(cfg)
    assert run_id_for(cfg) == before  # the same pack, the same id
    edit(folder / "policy.py", "def check_write", "# an edit\ndef check_write")
    after = run_id_for(cfg)
    assert after != before and after.startswith("gym_ids-evosyn-s0-")
    assert run_id_for(cfg, with_pack=False) == run_id_for(cfg.model_copy(), with_pack=False)  # --reuse's key


def test_synth_after_a_pack_edit_is_a_new_pass_and_says_so(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_syn")
    home = tmp_path / "h"
    first = evosyn("synth", "--domain", "gym_syn", "--n", "4", "--quiet", packs=packs, home=home)
    assert first.returncode == 0, first.stderr[-2000:]
    old = _pass_id(first.stdout)
    assert not NOTE.search(first.stdout + first.stderr)
    again = evosyn("synth", "--domain", "gym_syn", "--n", "4", "--quiet", packs=packs, home=home)
    assert _pass_id(again.stdout) == old and not NOTE.search(again.stdout + again.stderr)  # unchanged: resumed
    edit(folder / "policy.py", "def check_write", "# an edit\ndef check_write")
    out = evosyn("synth", "--domain", "gym_syn", "--n", "4", "--quiet", packs=packs, home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    new = _pass_id(out.stdout)
    notes = NOTE.findall(out.stdout + out.stderr)
    assert new != old and len(notes) == 1, out.stdout + out.stderr
    pack, kind, since, was, now, this = notes[0]
    assert (pack, kind, since, this) == ("gym_syn", "pass", old, new) and was != now
    reuse = evosyn("synth", "--domain", "gym_syn", "--n", "4", "--quiet", "--reuse", packs=packs, home=home)
    # the pass the config had before the edit (the old behaviour), said in one line
    assert reuse.returncode == 0 and _pass_id(reuse.stdout) == old, reuse.stdout + reuse.stderr
    assert f"--reuse: continuing pass {old}" in reuse.stderr, reuse.stderr
    # an explicit run id of a pass made by the pack before the edit: refused, naming the pack's change
    named = evosyn("synth", "--domain", "gym_syn", "--n", "4", "--run-id", old, packs=packs, home=home)
    assert named.returncode == 2 and named.stderr.count("\n") == 1, named.stderr
    assert f"pack gym_syn code {was} -> {now}" in named.stderr and "--reuse" in named.stderr, named.stderr
    budget = evosyn("synth", "--domain", "gym_syn", "--n", "5", "--run-id", old, "--reuse", packs=packs, home=home)
    assert budget.returncode == 2 and "budget 4 -> 5" in budget.stderr, budget.stderr  # --reuse: the pack only
    kept = evosyn("synth", "--domain", "gym_syn", "--n", "4", "--run-id", old, "--reuse", "--quiet", packs=packs,
                  home=home)
    assert kept.returncode == 0 and _pass_id(kept.stdout) == old, kept.stderr[-2000:]


RUN = ["run", "--domain", "gym_rerun", "--rounds", "1", "--budget", "8", "--config", "run.yaml", "--quiet"]


@pytest.mark.slow
def test_run_after_a_pack_edit_is_a_new_run_and_says_so(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_rerun")
    home = tmp_path / "h"
    (tmp_path / "run.yaml").write_text("test_size: 10\nchunk_size: 8\n")
    first = evosyn(*RUN, packs=packs, home=home, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    old = re.search(r"^ *evosyn report (\S+)$", first.stdout, re.M).group(1)
    edit(folder / "pack.py", '    description = "', '    description = "edited: ')
    out = evosyn(*RUN, packs=packs, home=home, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    new = re.search(r"^ *evosyn report (\S+)$", out.stdout, re.M).group(1)
    notes = NOTE.findall(out.stdout + out.stderr)
    assert new != old and len(notes) == 1, out.stdout + out.stderr
    assert notes[0][:3] == ("gym_rerun", "run", old) and notes[0][5] == new
    reuse = evosyn(*RUN, "--reuse", packs=packs, home=home, timeout=600)
    assert reuse.returncode == 0, reuse.stderr[-3000:]
    assert re.search(r"^ *evosyn report (\S+)$", reuse.stdout, re.M).group(1) == old  # the run before the edit
    assert f"--reuse: continuing run {old}" in reuse.stderr, reuse.stderr
