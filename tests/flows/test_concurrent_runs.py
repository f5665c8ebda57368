"""Three `evosyn run`s started together on one fresh store all finish, and the store agrees (slow)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evosyn.tasks.testset import KINDS
from tests.prefect_home import PREFECT_HOME

pytestmark = pytest.mark.slow

CONFIG = "domain: airline\nrounds: 1\nbudget: 8\nseed: {seed}\ntest_size: 10\nchunk_size: 4\narm: evosyn\n"
SEEDS = (1, 2, 3)


def test_three_concurrent_runs_on_a_fresh_store(tmp_path):
    import duckdb
    from mlflow.tracking import MlflowClient

    from evosyn.storage.store import Store
    from evosyn.storage.tracking import EXPERIMENT, default_tracking_uri

    home = tmp_path / "h"
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    env.pop("MLFLOW_TRACKING_URI", None)
    procs = []
    for seed in SEEDS:
        cfg = tmp_path / f"cfg{seed}.yaml"
        cfg.write_text(CONFIG.format(seed=seed))
        procs.append(subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errors = [p.communicate(timeout=900)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], "\n\n".join(e[-2000:] for e in errors)

    store = Store(home, create=False)
    run_ids = [r for r in store.runs() if not r.startswith("testset-")]
    assert len(run_ids) == 3
    client = MlflowClient(tracking_uri=default_tracking_uri(home))
    exp = client.get_experiment_by_name(EXPERIMENT)
    mlruns = client.search_runs([exp.experiment_id])
    parents = sorted(r.data.tags["evosyn.run_id"] for r in mlruns if r.data.tags["evosyn.level"] == "run")
    assert parents == run_ids and len(mlruns) == 6 and {r.info.status for r in mlruns} == {"FINISHED"}
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        assert sorted(con.execute("select run_id, status from runs").fetchall()) == [(r, "finished") for r in run_ids]
    finally:
        con.close()
    testsets = sorted(p.name for p in store.table_dir("tasks").glob("run_id=testset-*"))
    assert len(testsets) == len(KINDS)  # one shared set of each kind, built once: no task written twice
    for name in testsets:
        ids = [t.task_id for t in store.read_records("tasks", run_id=name.split("=", 1)[1])]
        assert ids and len(ids) == len(set(ids)), name
