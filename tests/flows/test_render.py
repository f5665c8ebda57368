"""Tables fit the terminal: a terminal's width (or COLUMNS) wraps long cells within their columns; a pipe with
no COLUMNS keeps every row whole on one line (for grep), and the title is never folded into the table's width."""
from __future__ import annotations

import os
import pty
import subprocess
import sys

from evosyn.flows.render import print_table

LONG = "state: final state differs from the state after the gold actions; " * 6  # ~400 characters
COLUMNS = ["round", "verified yield", "diagnostic success", "test success", "uniform test success", "reasons"]


def _print(capsys) -> list[str]:
    print_table("run synth-airline-s0-n4: 4 of 4 blueprints verified, with a title longer than the table", COLUMNS,
                [[1, "1.00", "0.000", "0.153", "0.160", LONG], [2, "0.90", "0.010", "0.200", "0.210", "short"]])
    return capsys.readouterr().out.splitlines()


def test_columns_80_fits_every_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    lines = _print(capsys)
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    text = "\n".join(lines)
    assert text.count("gold") == 6 and text.count("differs") == 6 and "short" in text  # wrapped, nothing cut


def test_a_pipe_keeps_whole_rows(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    lines = _print(capsys)
    assert lines[0] == "run synth-airline-s0-n4: 4 of 4 blueprints verified, with a title longer than the table"
    row = next(line for line in lines if "1.00" in line)
    assert LONG.strip() in row  # the whole cell on its row's one line


def test_a_terminal_gets_its_width():
    # the real console of a terminal 70 columns wide (a pseudo-terminal), COLUMNS unset
    code = ("import fcntl, struct, termios, sys\n"
            "fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 70, 0, 0))\n"
            "from evosyn.flows.render import print_table\n"
            f"print_table('a title', {COLUMNS!r}, [[1, 'a', 'b', 'c', 'd', {LONG!r}]])\n")
    main, child = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=child, stderr=subprocess.PIPE, env=env)
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    lines = [line for line in out.decode().splitlines() if line.strip()]
    plain = [line for line in lines if "\x1b" not in line] or lines
    assert len(lines) > 6 and max(len(line) for line in plain) <= 70, lines


def test_ids_stay_whole_on_a_narrow_terminal(capsys, monkeypatch):
    # a run id of a test set (50 characters) is never cut or folded: the text column wraps to make room, and a
    # table that cannot fit runs past the edge rather than losing what it shows
    monkeypatch.setenv("COLUMNS", "80")
    run = "testset-official-matched-airline-g1-s20260101-n300"
    print_table(None, ["run", "kind", "reasons"], [[run, "test set", LONG]])
    lines = capsys.readouterr().out.splitlines()
    assert any(run in line for line in lines) and max(map(len, lines)) <= 80, lines
    print_table(None, [f"column {i}" for i in range(12)], [[run] * 12])
    lines = capsys.readouterr().out.splitlines()
    assert all(line.count(run) == 12 for line in lines if "testset" in line), lines  # past the edge, whole
