"""A run resumed after it was tracked: nothing logged twice; its store readable from catalog.duckdb (slow)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

pytestmark = pytest.mark.slow

CONFIG = "domain: airline\nrounds: 2\nbudget: 8\nseed: 5\ntest_size: 10\nchunk_size: 4\narm: evosyn\n"


def cli(home, *args):
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    env.pop("MLFLOW_TRACKING_URI", None)
    p = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]


def artifacts(home) -> dict[str, int]:
    return {str(p.relative_to(home)): p.stat().st_mtime_ns for p in (home / "mlartifacts").rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    from mlflow.tracking import MlflowClient

    from evosyn.storage.store import Store
    from evosyn.storage.tracking import EXPERIMENT, default_tracking_uri

    tmp = tmp_path_factory.mktemp("resume")
    home, cfg = tmp / "h", tmp / "cfg.yaml"
    cfg.write_text(CONFIG)
    cli(home, "run", "--config", str(cfg))
    store = Store(home, create=False)
    run_id = store.runs()[0]
    first_row = store.read_records("runs", run_id=run_id)
    client = MlflowClient(tracking_uri=default_tracking_uri(home))
    exp = client.get_experiment_by_name(EXPERIMENT)
    last = client.search_runs([exp.experiment_id], "tags.`evosyn.round` = '2'")[0]
    # as if the first run died while logging round 2: its metrics are in, its completion tag is not
    if "evosyn.logged" in last.data.tags:
        client.delete_tag(last.info.run_id, "evosyn.logged")
    client.update_run(last.info.run_id, status="RUNNING")
    before = artifacts(home)
    cli(home, "run", "--resume", run_id)
    return home, run_id, client, exp.experiment_id, first_row, before


def test_resume_logs_each_metric_once_per_step(resumed):
    _, _, client, exp_id, *_ = resumed
    runs = client.search_runs([exp_id])
    assert len(runs) == 3  # the parent and two rounds, none added by the resume
    parent = next(r for r in runs if r.data.tags["evosyn.level"] == "run")
    assert parent.info.status == "FINISHED"
    for r in runs:
        rounds = [1, 2] if r is parent else [int(r.data.tags["evosyn.round"])]
        assert r.data.metrics, r.info.run_name
        for key in r.data.metrics:
            steps = sorted(m.step for m in client.get_metric_history(r.info.run_id, key))
            # one point per step (some metrics need a previous round, so start at round 2)
            assert steps == sorted(set(steps)) and set(steps) <= set(rounds), f"{r.info.run_name} {key}: {steps}"
        success = sorted(m.step for m in client.get_metric_history(r.info.run_id, "success_test"))
        assert success == rounds
        if r is not parent:
            assert r.info.status == "FINISHED" and r.data.tags.get("evosyn.logged") == "1"


def test_the_rounds_view_shows_every_headline_metric_of_the_rounds(resumed):
    import json

    from evosyn.storage.tracking import VIEW_TAG

    _, _, client, exp_id, *_ = resumed
    columns = json.loads(client.get_experiment(exp_id).tags[VIEW_TAG])["selectedColumns"]
    rounds = client.search_runs([exp_id], "tags.`evosyn.level` = 'round'")
    headline = {k for r in rounds for k in r.data.metrics if "." not in k}
    assert {"success_test", "factor_coverage", "verified_yield"} <= headline
    assert sorted(c[len("metrics.`"):-1] for c in columns if c.startswith("metrics.")) == sorted(headline)
    assert all((r.data.tags["evosyn.arm"], r.data.tags["evosyn.domain"]) == ("evosyn", "airline") for r in rounds)


def test_resume_uploads_no_artifact_again(resumed):
    home, *_, before = resumed
    assert before and artifacts(home) == before  # same files, none rewritten


def test_finishing_twice_writes_the_same_runs_row(resumed):
    from evosyn.storage.store import Store

    home, run_id, _, _, first_row, _ = resumed
    rows = Store(home, create=False).read_records("runs", run_id=run_id)
    assert rows == first_row and rows[0].status == "finished"


def test_an_external_duckdb_client_reads_every_table_of_the_run(resumed):
    import duckdb

    from evosyn.storage.records import TABLES
    from evosyn.storage.store import Store

    home, run_id, *_ = resumed
    store = Store(home, create=False)
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    try:
        for table in TABLES:
            n = con.execute(f'select count(*) from "{table}" where run_id = ?', [run_id]).fetchone()[0]
            assert n == store.count(table, run_id=run_id), table
        assert con.execute("select count(*) from tasks where run_id = ?", [run_id]).fetchone()[0] > 0
        assert con.execute("select status from runs where run_id = ?", [run_id]).fetchall() == [("finished",)]
    finally:
        con.close()
