"""storage/postgres.py: the URL forms each client gets, masked passwords, and on a real PostgreSQL
(tests/postgres_server.py) databases made on demand, the advisory lock, and MLflow stores that concurrent
first runs build once."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evosyn.storage import postgres, redact

URL = "postgresql://team:Pa55-word-xyz@db.example:5433/evosyn?sslmode=require"


def test_each_client_gets_its_driver_and_mlflow_its_own_database():
    assert postgres.prefect_url(URL) == "postgresql+asyncpg://team:Pa55-word-xyz@db.example:5433/evosyn?sslmode=require"
    assert postgres.mlflow_url(URL) == \
        "postgresql+psycopg://team:Pa55-word-xyz@db.example:5433/evosyn_mlflow?sslmode=require"
    assert postgres.libpq(postgres.mlflow_url(URL)).startswith("postgresql://team:")
    assert postgres.is_postgres("postgres://u@h/d") and postgres.is_postgres("postgresql+psycopg://u@h/d")
    assert not postgres.is_postgres("sqlite:///x.db") and not postgres.is_postgres(None)


def test_the_password_is_masked_and_registered_for_redaction():
    assert postgres.masked(URL) == "postgresql://team:***@db.example:5433/evosyn?sslmode=require"
    assert postgres.masked("postgresql://team@h:1/d") == "postgresql://team@h:1/d"
    postgres.check(URL)
    assert "Pa55-word-xyz" not in redact.redact(f"connecting to {postgres.prefect_url(URL)}")
    postgres.register_password("postgresql://team:p%40ss%2Fword-2@h:1/d")  # URL-encoded: both forms are masked
    assert redact.redact("p%40ss%2Fword-2 p@ss/word-2") == "*** ***"


@pytest.mark.parametrize("bad", ["sqlite:///x.db", "postgresql://u:p@/db", "postgresql://u:p@h:1/",
                                 "postgresql://u:secret-pass-1@h:1/a/b"])
def test_an_unusable_url_is_one_line_without_its_password(bad):
    with pytest.raises(postgres.PostgresError) as err:
        postgres.check(bad)
    assert "secret-pass-1" not in str(err.value) and "\n" not in str(err.value)


def test_a_refused_login_is_one_masked_line(pg_server):
    wrong = pg_server.url.replace(pg_server.url.split(":")[2].split("@")[0], "not-the-password-123")
    with pytest.raises(postgres.PostgresError, match="password authentication failed") as err:
        postgres.connect(wrong)
    assert "not-the-password-123" not in str(err.value) and "***" in str(err.value)


def test_a_missing_database_is_created_once(pg_server):
    url = pg_server.database()
    with pytest.raises(postgres.PostgresError, match="does not exist"):
        postgres.connect(url)
    postgres.ensure_database(url)
    postgres.connect(url).close()
    assert postgres.create_database(url) is False  # already there: nothing to do


def test_the_advisory_lock_makes_a_second_holder_wait(pg_server):
    """The second holder waits its turn, and its waiting does not block what the first does meanwhile: a
    ``CREATE INDEX CONCURRENTLY`` (Prefect's migrations run some) waits for every older snapshot, and a
    waiter blocked inside ``pg_advisory_lock`` would hold one for as long as the first holds the lock."""
    url, waiting, order = pg_server.database("lock"), threading.Event(), []
    postgres.ensure_database(url)

    def second():
        waiting.set()
        with postgres.advisory_lock(url, "test-lock", timeout=60, poll=0.1):
            order.append("second in")

    with postgres.advisory_lock(url, "test-lock"):
        t = threading.Thread(target=second)
        t.start()
        waiting.wait(10)
        time.sleep(0.5)
        with pytest.raises(postgres.PostgresError, match="waited 0s for lock test-lock"), \
                postgres.advisory_lock(url, "test-lock", timeout=0.2):
            pass
        with postgres.connect(url) as con:
            con.execute("SET statement_timeout = '20s'")
            con.execute("CREATE TABLE t (x int)")
            con.execute("CREATE INDEX CONCURRENTLY t_x ON t (x)")  # blocked by a waiter's snapshot: times out
        order.append("first done")
    t.join(60)
    assert order == ["first done", "second in"]


TRACKER = """
import sys
from pathlib import Path
from evosyn.storage.records import Run
from evosyn.storage.tracking import Tracker
t = Tracker(Path(sys.argv[1]), sys.argv[2])
mlrun = t.start_run(Run(run_id=sys.argv[3], round=0, domain="airline", rounds=1, budget=10))
t.log_metrics(t.start_round(mlrun, sys.argv[3], 1), {"success_test": 0.5}, step=1)
print(t.experiment_id)
"""


@pytest.mark.slow
def test_concurrent_first_runs_build_one_mlflow_store_on_postgresql(pg_server, tmp_path):
    """Three processes (three store roots) open a fresh PostgreSQL tracking store at once: MLflow builds its
    schema once (under the advisory lock), every run lands in one experiment, no password in any param, and
    the artifacts of a database client go to its store root (not ./mlruns of the working directory)."""
    from mlflow.tracking import MlflowClient

    uri = postgres.mlflow_url(pg_server.database("runs"))
    procs = [subprocess.Popen([sys.executable, "-c", TRACKER, str(tmp_path / f"root{i}"), uri, f"run-{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
             for i in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    assert len({out.strip() for out, _ in outs}) == 1  # one experiment
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([outs[0][0].strip()])
    assert sorted(r.info.run_name for r in runs) == sorted([f"run-{i}" for i in range(3)] +
                                                           [f"run-{i}/round-1" for i in range(3)])
    password = pg_server.url.split(":")[2].split("@")[0]
    assert not [r for r in runs if any(password in v for v in r.data.params.values())]
    location = client.get_experiment(outs[0][0].strip()).artifact_location
    assert location.startswith("file://") and Path(location[len("file://"):]).parent.parent == tmp_path
    assert not (tmp_path / "mlruns").exists()
