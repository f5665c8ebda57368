"""The last resort of the command line: an error no command named is one `error:` line, exit 1; `--debug` shows it."""
from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import sys
import click
import evosyn.flows.cli as cli

@cli.main.command("boom")
def boom():
    def inner():
        raise TypeError("a tool took 2 arguments but 3 were given")
    inner()

sys.argv = ["evosyn", *sys.argv[1:]]
cli.run()
"""


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "EVOSYN_DEBUG"}
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, env=e, timeout=120)


def test_unexpected_error_is_one_line_exit_1():
    p = _run("boom")
    assert p.returncode == 1
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines == [lines[0]] and lines[0].startswith("error: TypeError at <string>:")
    assert "a tool took 2 arguments" in lines[0] and "--debug" in lines[0]
    assert "Traceback" not in p.stderr


def test_debug_flag_and_env_show_the_traceback():
    for args, env in ((("--debug", "boom"), None), (("boom",), {"EVOSYN_DEBUG": "1"})):
        p = _run(*args, env=env)
        assert p.returncode == 1
        assert "Traceback (most recent call last)" in p.stderr and "TypeError: a tool took 2" in p.stderr
