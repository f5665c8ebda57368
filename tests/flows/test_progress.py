"""Live progress as a user sees it: a rich display on a terminal, one plain line per stage otherwise."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evosyn.flows.progress import LineRenderer, LiveRenderer, renderer
from evosyn.tasks.engine import listening, publish
from evosyn.tasks.progress import StageEvent
from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

REPO = Path(__file__).resolve().parents[2]
STAGES = ("design", "plan", "generate", "rollout", "verify", "train", "evaluate diagnostic", "evaluate test",
          "reflect")
ESC = "\x1b"
CONFIG = "domain: airline\nrounds: 1\nbudget: 40\nseed: {seed}\ntest_size: 60\nchunk_size: 8\n"


def ev(stage, done, kept, total=None, run="r", rejected=None):
    return StageEvent(run_id=run, round=1, stage=stage, done=done, kept=kept, total=total, rejected=rejected or {})


def test_plain_lines_one_per_stage_from_many_threads():
    out = io.StringIO()
    show = LineRenderer(out)
    show(ev("plan", 80, 80, total=80))

    def chunks():
        for _ in range(10):
            show(ev("generate", 1, 1))
            show(ev("rollout", 1, 1))
            show(ev("verify", 1, 0, rejected={"policy": 1}))

    threads = [threading.Thread(target=chunks) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lines = out.getvalue().splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["round 1 plan", "round 1 generate", "round 1 rollout",
                                                  "round 1 verify"]
    assert lines[3].startswith("round 1 verify: 0/80 kept; rejected: policy 80 (")
    assert ESC not in out.getvalue()


def test_a_listener_hears_only_its_run_and_only_while_registered():
    heard = []
    with listening("a", heard.append):
        publish(ev("plan", 1, 1, total=1, run="a"))
        publish(ev("plan", 1, 1, total=1, run="b"))
    publish(ev("plan", 1, 1, total=1, run="a"))
    assert [e.run_id for e in heard] == ["a"]


def test_the_renderer_is_plain_off_a_terminal_or_quiet():
    from rich.console import Console

    assert isinstance(renderer(stream=io.StringIO()), LineRenderer)
    live = LiveRenderer(Console(file=io.StringIO(), force_terminal=True, width=120))
    with live:
        live("test set: 10 tasks")
        live(ev("plan", 4, 4, total=4))
        live(ev("generate", 2, 2))
        assert [t.description for t in live.progress.tasks] == ["round 1 generate"]
        live(ev("generate", 2, 1, rejected={"infeasible": 1}))
        assert not live.progress.tasks  # a finished stage is a line, not a bar
    text = live.console.file.getvalue()
    assert "round 1 generate: 3/4 built; rejected: infeasible 1" in text and "test set: 10 tasks" in text


def _cli(home, *args):
    env = {**os.environ, "EVOSYN_HOME": str(home),
           "PREFECT_HOME": PREFECT_HOME,
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return [sys.executable, "-m", "evosyn.flows.cli", *args], env


def _under_pty(cmd, env, timeout=600) -> tuple[int, str]:
    """Run ``cmd`` with a pseudo-terminal as stdin, stdout and stderr; everything it wrote, as text."""
    import pty

    master, slave = pty.openpty()
    os.set_blocking(master, True)
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env={**env, "COLUMNS": "160"},
                            cwd=REPO, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []

    def read():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    rc = proc.wait(timeout=timeout)
    reader.join(timeout=30)
    os.close(master)
    return rc, b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_run_on_a_terminal_shows_live_stages_and_off_it_one_line_each(tmp_path):
    home = tmp_path / "home"
    cfg0, cfg1 = tmp_path / "c0.yaml", tmp_path / "c1.yaml"
    cfg0.write_text(CONFIG.format(seed=0))
    cfg1.write_text(CONFIG.format(seed=1))

    cmd, env = _cli(home, "run", "--config", str(cfg0))  # not a terminal: pipes
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ESC not in done.stderr
    for stage in STAGES:
        hits = [ln for ln in done.stderr.splitlines() if ln.startswith(f"round 1 {stage}: ")]
        assert len(hits) == 1, (stage, done.stderr)
    (verify,) = [ln for ln in done.stderr.splitlines() if ln.startswith("round 1 verify: ")]
    assert re.fullmatch(r"round 1 verify: \d+/\d+ kept(; rejected: .+)? \(\d+\.\d+s\)", verify)
    run_id = re.search(r"run (airline-evosyn-s0-\w+)", done.stdout).group(1)
    # the next commands, filled in (EVOSYN_HOME names this store, so they need no --home)
    assert f"\n  evosyn report {run_id}\n" in done.stdout
    assert f"store: {home.resolve()}" in done.stdout and f"where run_id = '{run_id}'" in done.stdout

    cmd, env = _cli(home, "run", "--config", str(cfg1))
    rc, screen = _under_pty(cmd, env)
    assert rc == 0, screen[-3000:]
    assert ESC in screen and "━" in screen  # rich drew bars
    # a running stage's bar: its label, items done / total, then the finished stage's line
    assert re.search(r"round 1 (generate|rollout|verify|evaluate test)\S*\s.*\d+/\d+", screen), screen[-3000:]
    for stage in STAGES:
        assert f"round 1 {stage}: " in screen, stage
    assert "next:" in screen and "report airline-evosyn-s1-" in screen

    cmd, env = _cli(home, "run", "--config", str(cfg1), "--quiet")  # a terminal, but --quiet: plain lines
    rc, screen = _under_pty(cmd, env)
    assert rc == 0, screen[-3000:]
    lines = [ln.strip("\r") for ln in screen.splitlines()]
    for stage in STAGES:
        assert len([ln for ln in lines if ln.startswith(f"round 1 {stage}: ")]) == 1, stage
    progress = screen.split("round 1: verified")[0]  # before the summary table (rich styles that)
    assert ESC not in progress, progress
