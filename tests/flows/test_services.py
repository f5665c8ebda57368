"""Process bookkeeping of `evosyn up` / `down`, on real processes (the full stack: test_e2e_ui.py; the process
helper itself: tests/agents/test_servers.py)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

import pytest

from evosyn.flows.cli_services import pools_without_worker, worker_hint
from evosyn.flows.services import (
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
from tests.prefect_home import PREFECT_HOME

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


@pytest.mark.slow
def test_pools_without_an_online_worker_are_named_with_the_command_that_starts_one(monkeypatch):
    """On a real (temporary) Prefect server: a pool with a worker heartbeat is fine; one without a worker
    and one that does not exist are named, and the hint carries the API and the worker command."""
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.actions import WorkPoolCreate

    from evosyn.flows.prefect_api import start_temporary

    # the migrated database the slow flow tests share (tests/flows/test_prefect_api.py)
    monkeypatch.setenv("PREFECT_HOME", PREFECT_HOME)
    monkeypatch.setenv("PREFECT_API_URL", "")  # recorded, so that the URL start_temporary sets goes at the end
    monkeypatch.delenv("PREFECT_API_URL")
    server = start_temporary()
    api = server.api
    tag = uuid.uuid4().hex[:8]  # the database is shared: names of this test only
    busy, idle, absent = f"busy-{tag}", f"idle-{tag}", f"absent-{tag}"
    try:
        with SyncPrefectClient(api) as client:
            for name in (busy, idle):
                client.create_work_pool(WorkPoolCreate(name=name, type="process"))
            client.send_worker_heartbeat(busy, f"worker-{tag}", heartbeat_interval_seconds=60)
            try:
                assert pools_without_worker(api, (busy, idle, absent)) == {
                    idle: "no worker", absent: "not created yet (`evosyn deploy` creates it)"}
                assert pools_without_worker(api, ()) == {}
            finally:
                for name in (busy, idle):
                    client.delete_work_pool(name)
    finally:
        server.stop()
    hint = worker_hint("gpu", "no worker", api)
    assert hint.startswith("pool gpu: no worker; runs of sft-train (training per round) wait until a worker polls it") and "a GPU machine" in hint
    assert f"`PREFECT_API_URL={api} prefect worker start --pool gpu --type process`" in hint
    assert "`evosyn up --pool gpu`" in hint
