"""Kill points: off unless asked for; when asked for, a real SIGKILL at the named point only."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from evosyn.storage import faults

SCRIPT = ("from evosyn.storage.faults import kill_point\n"
          "for r in (1, 2):\n"
          "    for p in ('design', 'reflect'):\n"
          "        print(p, r, flush=True)\n"
          "        kill_point(p, r)\n")


def run(spec: str | None):
    env = {k: v for k, v in os.environ.items() if k != faults.ENV}
    if spec is not None:
        env[faults.ENV] = spec
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)


def test_unset_never_kills():
    res = run(None)
    assert res.returncode == 0 and res.stdout.split("\n")[-2] == "reflect 2"


@pytest.mark.parametrize("spec, last", [("design", "design 1"), ("reflect@2", "reflect 2"), ("design@2", "design 2")])
def test_a_point_kills_with_sigkill_where_named(spec, last):
    res = run(spec)
    assert res.returncode == -signal.SIGKILL
    assert res.stdout.strip().split("\n")[-1] == last


def test_unknown_points_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="known points: design, plan"):
        faults.parse("desing")
    with pytest.raises(ValueError, match="must be a number"):
        faults.parse("reflect@two")
    assert faults.parse("reflect@2") == ("reflect", 2)
