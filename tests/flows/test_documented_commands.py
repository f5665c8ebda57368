"""Every per-domain command the README and the getting-started page show works with its defaults on every built-in
domain: exit 0, no traceback (issue 58: `verify --official` and `bench verify` once knew only tau2's split names).

The commands are read from the documents, so a command documented later is either run here or named in
``NOT_RUN`` with the reason; sizes are the smallest that still run the whole command (``--n``, ``--limit``).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evosyn.envs.packs import get_pack, known

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
BUILT_IN = [d for d in known(with_environment=True) if get_pack(d).package.startswith("evosyn.domains.")]

# the command's words -> its arguments here ({d}: the domain, {out}: a scratch folder); with its defaults but
# for sizes
FAST = {
    ("envs", "show"): ["envs", "show", "{d}"],
    ("envs", "check"): ["envs", "check", "{d}"],
    ("preview",): ["preview", "--domain", "{d}", "--n", "2"],
    ("synth",): ["synth", "--domain", "{d}", "--n", "3"],
    ("verify",): ["verify", "--domain", "{d}", "--official"],
    ("bench", "verify"): ["bench", "verify", "--domain", "{d}", "--limit", "3", "--output", "{out}/verify.json"],
}
SLOW = {  # over 30 s each on a laptop
    ("testsets",): ["testsets", "--domain", "{d}"],
    ("run",): ["run", "--domain", "{d}", "--rounds", "1"],
}
NOT_RUN = {("evaluate",): "--official needs a run's learner (--run, --round) or a served model (--agent)"}


def documented() -> set[tuple[str, ...]]:
    """The words of each command the documents show with a domain (``--domain D``, ``envs show D``)."""
    found = set()
    for doc in DOCS:
        for line in doc.read_text().splitlines():
            if "evosyn " not in line:
                continue
            for segment in re.split(r" \| | · |`", line.split("#")[0]):
                words = segment.strip().removeprefix("evosyn ").split()
                head = tuple(w for w in words[:2] if re.fullmatch(r"[a-z][a-z-]*", w))
                rest = words[len(head):]
                if head and head[0] != "evosyn" and (any(w == "--domain" for w in rest) or rest[:1] == ["D"]):
                    found.add(head if head[:1] in (("envs",), ("bench",)) else head[:1])
    return found


def test_every_documented_per_domain_command_is_run_here():
    shown = documented() | {("bench", "verify")}  # the README's results table: `evosyn bench verify`
    assert {("verify",), ("synth",), ("preview",), ("envs", "show"), ("envs", "check"), ("run",)} <= shown
    assert shown - set(FAST) - set(SLOW) - set(NOT_RUN) == set()


def test_the_built_in_domains_are_all_here():
    assert {"airline", "retail", "telecom", "car_bench"} <= set(BUILT_IN)


def _run(args: list[str], domain: str, tmp_path: Path, timeout: int = 120) -> None:
    """The command as a user runs it: the installed console script."""
    argv = [a.format(d=domain, out=tmp_path) for a in args]
    out = subprocess.run([str(Path(sys.executable).with_name("evosyn")), *argv], text=True,
                         capture_output=True, env={**os.environ, "EVOSYN_HOME": str(tmp_path / "home")},
                         cwd=tmp_path, timeout=timeout)
    said = out.stdout + out.stderr
    assert out.returncode == 0, f"evosyn {' '.join(argv)}: exit {out.returncode}\n{said[-2000:]}"
    assert "Traceback" not in said


@pytest.mark.parametrize("command", list(FAST), ids=" ".join)
@pytest.mark.parametrize("domain", BUILT_IN)
def test_a_documented_command_works_with_its_defaults(domain, command, tmp_path):
    _run(FAST[command], domain, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("command", list(SLOW), ids=" ".join)
@pytest.mark.parametrize("domain", BUILT_IN)
def test_a_long_documented_command_works_with_its_defaults(domain, command, tmp_path):
    _run(SLOW[command], domain, tmp_path, timeout=1200)
