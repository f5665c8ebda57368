"""The closed loop through Prefect as a user runs it: store, MLflow, report, kill and resume (slow)."""
import math
import os
import subprocess
import sys

import pytest

from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

pytestmark = pytest.mark.slow

CONFIG = "domain: airline\nrounds: 2\nbudget: 36\nseed: {seed}\ntest_size: 30\nchunk_size: 6\narm: {arm}\n"


def start(home, *args):
    # one Prefect home for the session: its database is migrated once, not per run
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    return subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run(home, *args, timeout=600):
    p = start(home, *args)
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-3000:]
    return out, err


def config(tmp_path, seed=0, arm="evosyn"):
    path = tmp_path / f"cfg-{arm}-{seed}.yaml"
    path.write_text(CONFIG.format(seed=seed, arm=arm))
    return path


KEYS = {"runs": ["run_id"], "spaces": ["round", "version"], "directions": ["direction_id"],
        "blueprints": ["blueprint_id"], "tasks": ["task_id"], "trajectories": ["trajectory_id"],
        "verdicts": ["verdict_id"], "sft_examples": ["example_id"], "evaluations": ["evaluation_id"],
        "feedback": ["feedback_id"], "probes": ["round", "probe"], "reflections": ["round_id"],
        "llm_calls": ["call_id"]}


def counts(home):
    """(rows, distinct keys) per table of the run partitions (the shared test set excluded)."""
    import polars as pl

    from evosyn.storage.store import Store

    store = Store(home, create=False)
    out = {}
    for table, key in KEYS.items():
        df = store.read(table).filter(~pl.col("run_id").str.starts_with("testset-"))
        out[table] = (df.height, df.select(key).unique().height)
    return out


def test_run_fills_store_mlflow_and_report(tmp_path):
    home = tmp_path / "h"
    out, err = run(home, "run", "--config", str(config(tmp_path)))
    assert "round 1:" in err and "round 2:" in err and "test success" in out
    c = counts(home)
    for table in ("runs", "spaces", "directions", "blueprints", "tasks", "trajectories", "verdicts",
                  "sft_examples", "evaluations", "feedback", "probes"):
        assert c[table][0] > 0, table
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["evosyn"])
    parent = runs[runs["tags.evosyn.level"] == "run"]
    assert len(parent) == 1
    rounds = runs[runs["tags.mlflow.parentRunId"] == parent["run_id"].iloc[0]]
    assert sorted(rounds["tags.evosyn.round"]) == ["1", "2"]
    assert rounds["metrics.success_test"].notna().all() and rounds["metrics.factor_coverage"].notna().all()
    second = rounds[rounds["tags.evosyn.round"] == "2"].iloc[0]  # B.12 needs a previous round
    assert second["metrics.added_train_examples"] > 0 and not math.isnan(second["metrics.success_gain_per_1k"])
    run_id = parent["tags.evosyn.run_id"].iloc[0]
    out, _ = run(home, "report", run_id)
    assert (home / "reports" / run_id / "report.html").read_text().count("<img") >= 2
    assert "Evolution trace" in (home / "reports" / run_id / "summary.md").read_text()


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_a_round_runs_end_to_end_on_every_generator_domain(tmp_path, domain):
    """Design to reflect through the real CLI, test sets included: telecom's official gold actions list no
    lookups, so its official-matched set must still build (from cells with the read count left free)."""
    path = tmp_path / "cfg.yaml"
    path.write_text(f"domain: {domain}\nrounds: 1\nbudget: 12\nseed: 0\ntest_size: 12\nchunk_size: 6\n")
    home = tmp_path / "h"
    out, err = run(home, "run", "--config", str(path), "--quiet")
    assert "round 1:" in err and "test success" in out
    from evosyn.storage.store import Store

    sets = {e.task_set for e in Store(home, create=False).read_records("evaluations")}
    assert {"test", "test_uniform"} <= sets
