"""Process bookkeeping of `evosyn up` / `down`, on real processes (the full stack: test_e2e_ui.py)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from flows.services import (
    Service,
    ServiceError,
    alive,
    down,
    family,
    load_state,
    save_state,
    stop,
    up,
)

# a parent that starts a grandchild and both ignore SIGINT: only SIGTERM/SIGKILL (or the session) stops them
TREE = ("import signal, subprocess, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(120)']); time.sleep(120)")


def spawn_tree() -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", TREE], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(family({proc.pid})) < 2:
        assert time.monotonic() < deadline, "the test's process tree did not start"
        time.sleep(0.05)
    return proc


def test_stop_ends_the_whole_tree(tmp_path):
    proc = spawn_tree()
    procs = family({proc.pid})
    assert len(procs) == 2 and all(alive(p) for p in procs)
    assert stop(Service("worker-cpu", proc.pid, "w", str(tmp_path / "log")), grace=5) == set()
    proc.wait(timeout=5)
    assert not [p for p in procs if alive(p)] and not family({proc.pid})


def test_an_exited_unreaped_child_is_not_alive():
    import psutil

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not yet waited for
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.05)
    assert not alive(proc.pid) and proc.pid not in family({proc.pid})
    proc.wait(timeout=5)
    assert not alive(proc.pid) and not alive(-1)


def test_down_stops_recorded_services_and_forgets_them(tmp_path):
    procs = [spawn_tree(), spawn_tree()]
    save_state(tmp_path, {"mlflow": Service("mlflow", procs[0].pid, "http://127.0.0.1:1", "m.log"),
                          "worker-cpu": Service("worker-cpu", procs[1].pid, "w", "w.log")})
    pids = family({p.pid for p in procs})
    assert len(pids) == 4
    assert down(tmp_path, say=lambda s: None) == []
    for p in procs:
        p.wait(timeout=5)
    assert not [p for p in pids if alive(p)]
    assert load_state(tmp_path) == {}
    assert down(tmp_path, say=lambda s: None) == []  # nothing recorded: nothing to do


def test_up_refuses_a_busy_port_before_starting_anything(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ServiceError, match=f"port {port} .* in use"):
            up(tmp_path, tmp_path, prefect_port=port, mlflow_port=port, say=lambda s: None)
    assert load_state(tmp_path) == {}
