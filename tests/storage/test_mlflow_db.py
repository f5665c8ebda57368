"""The MLflow database is built aside and moved into place: a kill or a full disk inside MLflow's own build
leaves no half-made database, and one left by an older version is rebuilt when it holds no run."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from evosyn.storage.faults import AFTER_ENV, ENV, FULL_ENV
from evosyn.storage.mlflow_db import ensure_tracking_db
from evosyn.storage.tracking import Tracker, default_tracking_uri

BUILD = ("import sys; from evosyn.storage.mlflow_db import ensure_tracking_db; "
         "ensure_tracking_db(sys.argv[1]); print('built')")


def _child(root, **env):
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", BUILD, default_tracking_uri(root)], env=full, capture_output=True,
                          text=True, timeout=300)


def _tables(path):
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    finally:
        con.close()


def _leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".mlflow.db"))


def test_a_fresh_database_is_built_complete_with_no_temp_file_left(tmp_path):
    ensure_tracking_db(default_tracking_uri(tmp_path))
    assert {"experiments", "runs", "alembic_version"} <= _tables(tmp_path / "mlflow.db")
    assert _leftovers(tmp_path) == []
    Tracker(tmp_path)  # opens it as every run does


def test_head_revision_is_the_one_mlflow_records_in_a_database_it_builds(tmp_path):
    """``head_revision`` reads MLflow's migration folder (MLflow has no public way to name its schema revision):
    this fails if MLflow moves the folder or stops building the database to its head."""
    from mlflow.tracking import MlflowClient

    from evosyn.storage.mlflow_db import head_revision

    path = tmp_path / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments(max_results=1)  # built by MLflow itself
    con = sqlite3.connect(path)
    try:
        versions = [r[0] for r in con.execute("select version_num from alembic_version")]
    finally:
        con.close()
    assert versions == [head_revision()]


@pytest.mark.parametrize("after", ["0", "0.5", "1.5"])
def test_a_kill_inside_the_build_leaves_no_database_and_the_next_open_builds_it(tmp_path, after):
    res = _child(tmp_path, **{ENV: "mlflow-init", AFTER_ENV: after})
    if res.returncode == 0:  # the build finished before the timer: then it is complete
        assert "built" in res.stdout
    else:
        assert res.returncode == -signal.SIGKILL
        assert not (tmp_path / "mlflow.db").exists()  # never a half-made one in place
    tracker = Tracker(tmp_path)  # what the resumed run does: no error, and the experiment is there
    assert tracker.client.get_experiment(tracker.experiment_id).name == "evosyn"
    assert _leftovers(tmp_path) == []  # the killed build's temp files are gone


def test_a_full_disk_inside_the_build_fails_and_leaves_nothing(tmp_path):
    res = _child(tmp_path, **{FULL_ENV: "mlflow-init"})
    assert res.returncode != 0 and "built" not in res.stdout
    assert not (tmp_path / "mlflow.db").exists() and _leftovers(tmp_path) == []
    assert _child(tmp_path).returncode == 0  # space again: built
    assert "runs" in _tables(tmp_path / "mlflow.db")


def _half_made(path):
    """What a kill inside a migration leaves: an older schema revision and a batch migration's copy table."""
    ensure_tracking_db(f"sqlite:///{path}")
    con = sqlite3.connect(path)
    con.execute("update alembic_version set version_num = '0a8213491aaa'")
    con.execute("create table _alembic_tmp_experiments (experiment_id integer)")
    con.commit()
    con.close()


def test_a_half_made_database_without_runs_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "mlflow.db"
    _half_made(path)
    Tracker(tmp_path)
    assert "_alembic_tmp_experiments" not in _tables(path)
    assert (tmp_path / "mlflow.db.broken-1").is_file()


def test_a_database_that_holds_runs_is_never_rebuilt(tmp_path):
    tracker = Tracker(tmp_path)
    tracker.client.create_run(tracker.experiment_id)
    path = tmp_path / "mlflow.db"
    con = sqlite3.connect(path)
    con.execute("update alembic_version set version_num = '0a8213491aaa'")
    con.commit()
    con.close()
    ensure_tracking_db(f"sqlite:///{path}")  # left as it is
    assert path.is_file() and not (tmp_path / "mlflow.db.broken-1").exists()
    # a new process (this one keeps MLflow's store of the URI): the open fails in one line
    code = ("import sys; from evosyn.storage.tracking import Tracker; from evosyn.storage.mlflow_db import TrackingStoreError\n"
            "try:\n    Tracker(sys.argv[1])\nexcept TrackingStoreError as e:\n    print('ERR', e)")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=300)
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("ERR")]
    assert "holds runs" in line and str(path) in line
