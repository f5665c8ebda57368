"""A started run that cannot go on says so in one line: a run id busy in another process, a server error that
crosses a pickling boundary intact."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time

import pytest

from tests.prefect_home import PREFECT_HOME


def test_stage_unavailable_survives_pickling_with_its_message():
    from evosyn.agents.roles import StageUnavailable

    exc = StageUnavailable("designer", "http://127.0.0.1:9/v1", "connection refused")
    back = pickle.loads(pickle.dumps(exc))  # Prefect pickles task results and exceptions
    assert type(back) is StageUnavailable and str(back) == str(exc)
    assert (back.role, back.endpoint, back.error) == ("designer", "http://127.0.0.1:9/v1", "connection refused")


@pytest.mark.slow
def test_a_run_already_running_elsewhere_is_refused_in_one_line(tmp_path):
    from evosyn.flows.run import run_id_for
    from evosyn.config import load_config
    from evosyn.storage.locks import store_lock

    home = tmp_path / "home"
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text("domain: airline\nrounds: 1\nbudget: 4\nseed: 0\ntest_size: 4\n")
    run_id = run_id_for(load_config(cfg_file))
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    with store_lock(home, f"run-{run_id}"):  # the first process of this run id
        t0 = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg_file)], env=env,
                             capture_output=True, text=True, timeout=600)
        took = time.monotonic() - t0
    assert res.returncode == 1, res.stderr[-2000:]
    # at once: the lock is taken before Prefect's temporary server starts (no server, no flow imports)
    assert took < 30, took
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and run_id in errors[0] and "already running" in errors[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    from evosyn.storage.store import Store

    assert Store(home, create=False).read_records("runs", run_id=run_id) == []  # the busy run is not touched
