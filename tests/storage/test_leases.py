"""Locks of an s3:// store (storage/leases.py) against a real SeaweedFS: a second owner is refused, in another
process, thread or machine; a dead holder's lock is taken over, a live one's never."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from evosyn.flows.run_id import RunBusy, run_lock
from evosyn.storage import objectstore
from evosyn.storage.locks import StoreLockTimeout, lock_path, store_lock

HOLD = """
import sys, time
from evosyn.storage.locks import store_lock
held = store_lock(sys.argv[1], sys.argv[2])  # kept: a dropped context manager is closed, and releases
held.__enter__()
print("held", flush=True)
time.sleep(600)
"""


def _holder(root: str, name: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, root, name], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_owner_is_refused_until_the_holder_dies(s3_root):
    holder = _holder(s3_root, "run-r1")
    try:
        with pytest.raises(RunBusy, match="already running"):
            run_lock(s3_root, "r1")
        with pytest.raises(StoreLockTimeout, match="held by another run"), store_lock(s3_root, "run-r1", timeout=1.0):
            pass
        with store_lock(s3_root, "run-r2", timeout=0):  # another name is another lock
            pass
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    # its process is gone (SIGKILL: no release): a holder on this machine is known dead without waiting for expiry
    busy = run_lock(s3_root, "r1")
    try:
        lease = json.loads(lock_path(s3_root, "run-r1").read_bytes())
        assert lease["pid"] == os.getpid()
    finally:
        busy.__exit__(None, None, None)
    assert not lock_path(s3_root, "run-r1").exists()  # released: the object is gone


def _foreign(path, expires: float) -> None:
    objectstore.put(path, json.dumps({"host": "another-machine", "pid": 1, "started": 0.0, "token": "t",
                                      "expires": expires}).encode())


def test_another_machines_lease_holds_until_it_expires(s3_root):
    path = lock_path(s3_root, "schema")
    _foreign(path, time.time() + 60)
    with pytest.raises(StoreLockTimeout), store_lock(s3_root, "schema", timeout=1.0):
        pass
    _foreign(path, time.time() - 1)  # it stopped renewing a while ago
    with store_lock(s3_root, "schema", timeout=0):
        assert json.loads(path.read_bytes())["host"] != "another-machine"
    assert not path.exists()


def test_of_many_concurrent_takers_exactly_one_holds(s3_root):
    won, start = [], threading.Barrier(6)
    release = threading.Event()

    def take():
        start.wait()
        try:
            with store_lock(s3_root, "catalog", timeout=0):
                won.append(threading.get_ident())
                release.wait(10)
        except StoreLockTimeout:
            pass

    threads = [threading.Thread(target=take) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(2)
    release.set()
    for t in threads:
        t.join()
    assert len(won) == 1


def test_a_held_lease_is_renewed_and_reentrant(s3_root, monkeypatch):
    monkeypatch.setenv("EVOSYN_LEASE_S", "1.5")
    held, done = threading.Event(), threading.Event()

    def hold():
        # the same thread again: re-enters
        with store_lock(s3_root, "run-long"), store_lock(s3_root, "run-long", timeout=0):
            held.set()
            done.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(30)
    time.sleep(3.5)  # past two lease lengths: only renewals keep it
    try:
        with pytest.raises(StoreLockTimeout), store_lock(s3_root, "run-long", timeout=0):
            pass
        assert json.loads(lock_path(s3_root, "run-long").read_bytes())["expires"] > time.time()
    finally:
        done.set()
        t.join()
    with store_lock(s3_root, "run-long", timeout=0):
        pass
