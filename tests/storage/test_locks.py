"""Store locks: exclusive across processes, re-entrant in a thread, one clear line on timeout."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from evosyn.storage.locks import StoreLockTimeout, lock_path, store_lock

HOLD = ("import sys; from evosyn.storage.locks import store_lock\n"
        "with store_lock(sys.argv[1], 'mlflow'):\n"
        "    print('held', flush=True); sys.stdin.read()\n")


def _holder(root):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_another_process_holding_the_lock_times_out_with_one_line(tmp_path):
    p = _holder(tmp_path)
    try:
        with pytest.raises(StoreLockTimeout) as err, store_lock(tmp_path, "mlflow", timeout=0.3):
            pass
        msg = str(err.value)
        assert "\n" not in msg and str(lock_path(tmp_path, "mlflow")) in msg and "EVOSYN_LOCK_TIMEOUT_S" in msg
    finally:
        p.communicate("\n", timeout=30)
    with store_lock(tmp_path, "mlflow", timeout=5):  # released with its holder
        pass


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    p = _holder(tmp_path)
    p.send_signal(signal.SIGKILL)
    p.wait()
    with store_lock(tmp_path, "mlflow", timeout=5):
        pass


def test_nested_use_in_one_thread_re_enters(tmp_path):
    with store_lock(tmp_path, "catalog", timeout=1), store_lock(tmp_path, "catalog", timeout=1):
        assert lock_path(tmp_path, "catalog").exists()


def test_lock_names_are_safe(tmp_path):
    with pytest.raises(ValueError, match="lock name"):
        lock_path(tmp_path, "../x")
