"""A service that goes away mid-run (slow): an S3 store's server (a real SeaweedFS of its own, tests/s3server.py)
stopped while `evosyn run` writes to it, or the PostgreSQL of `evosyn up --db local` (under its Prefect server)
killed, ends the run within its retry budget (EVOSYN_SERVICE_RETRY_S) with one `error:` line naming the service
and what to do, exit 1; `store check` meanwhile says the store cannot be reached; once the service is back on the
same data, `--resume` gives the rows of an uninterrupted run."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from evosyn.envs.packs import get_domain
from evosyn.storage.digest import table_digests
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from evosyn.tasks import testset

from tests import s3server
from tests.flows.test_run import PREFECT_HOME, run

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

CONFIG = "domain: airline\nrounds: 1\nbudget: 12\nseed: 6\ntest_size: 10\nchunk_size: 6\n"
RETRY_S = 4  # the budget the run gets: it must be gone within about this much after its next request


def _digests(location, n=10):
    store = Store(location, create=False)
    (run_id,) = store.runs()
    return run_id, table_digests(store, [run_id, testset.test_set_run_id(get_domain("airline"), n=n)])


def _restart(server: s3server.S3Server) -> s3server.S3Server:
    """The same SeaweedFS again: its command line (ports, data folder), started anew."""
    with open(server.log, "ab") as out:
        proc = subprocess.Popen(server.process.args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=server.log.parent)
    back = s3server.S3Server(server.endpoint, proc, server.log, server.shared)
    deadline = time.monotonic() + s3server.START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            back.bucket(f"evosyn-probe-{uuid.uuid4().hex[:8]}")  # answers, and writes
            return back
        except Exception:  # noqa: BLE001 (not up yet)
            time.sleep(0.5)
    s3server.stop(back)
    raise RuntimeError(f"SeaweedFS did not come back on {server.endpoint}")


def _wait_for_rows(server: s3server.S3Server, prefix: str, table: str, timeout: float = 300) -> None:
    """Until the run has put a chunk of round 1's ``table`` (so it is mid-run, its test set stored)."""
    import s3fs

    fs = s3fs.S3FileSystem(key=s3server.ACCESS_KEY, secret=s3server.SECRET_KEY, endpoint_url=server.endpoint,
                           use_listings_cache=False, skip_instance_cache=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fs.glob(f"{prefix}/tables/{table}/run_id=airline-*/round=1/*.parquet"):
            return
        time.sleep(0.2)
    raise AssertionError(f"no round-1 {table} chunk within {timeout}s")


def test_store_check_on_an_s3_endpoint_that_does_not_answer_says_it_cannot_be_reached(tmp_path):
    """No server on the endpoint's port: one line within the retry budget, not "bucket does not exist"."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AWS_ENDPOINT_URL_S3": endpoint, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "EVOSYN_LOCAL_HOME": str(tmp_path / "lh"),
           "EVOSYN_SERVICE_RETRY_S": "2"}
    for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        env.pop(var, None)
    t0 = time.monotonic()
    check = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "--home", "s3://evosyn-gone/p/store", "store",
                            "check"], env=env, capture_output=True, text=True, timeout=120, check=False)
    said = (check.stdout + check.stderr).strip()
    assert check.returncode == 2 and len(said.splitlines()) == 1, said
    assert said.startswith("error: store root s3://evosyn-gone/p/store: the object store at " + endpoint), said
    assert "(bucket evosyn-gone) cannot be reached" in said and "does not exist" not in said, said
    assert "EVOSYN_SERVICE_RETRY_S" in said
    assert time.monotonic() - t0 < 30


@pytest.mark.slow
def test_s3_stopped_mid_run_is_one_line_within_the_budget_and_resumes_row_identically(tmp_path, monkeypatch):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    local = tmp_path / "local-store"
    run(local, "run", "--config", str(cfg), "--quiet")
    run_id, want = _digests(local)

    (tmp_path / "weed").mkdir()
    server = s3server.start(tmp_path / "weed")
    try:
        prefix = f"{server.shared}/{uuid.uuid4().hex[:8]}/store"
        root = f"s3://{prefix}"
        env = {**os.environ, **server.env(), "EVOSYN_HOME": root, "EVOSYN_LOCAL_HOME": str(tmp_path / "lh"),
               "PREFECT_HOME": PREFECT_HOME, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
               "EVOSYN_SERVICE_RETRY_S": str(RETRY_S)}
        for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            env.pop(var, None)
        p = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg), "--quiet"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for_rows(server, prefix, "blueprints")
            s3server.stop(server)
            stopped = time.monotonic()
            out, err = p.communicate(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
        took = time.monotonic() - stopped
        lines = [line for line in (out + err).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("error:")]
        assert p.returncode == 1, err[-3000:]
        assert "Traceback" not in err and "WARNING" not in err and "ERROR" not in err, err[-3000:]
        assert len(errors) == 1 and errors == [lines[-1]], lines[-10:]
        line = errors[0]
        assert f"the object store at {server.endpoint} (bucket {server.shared})" in line, line
        assert "stopped answering" in line and f"--resume {run_id}" in line, line
        # what it had left to do when the server went: its next request's retries, the failed stage's unwinding
        assert took < 30 + 3 * RETRY_S, f"the run ended {took:.0f}s after the server stopped"

        # `store check` meanwhile: the store cannot be reached (not "bucket does not exist")
        check = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "store", "check"], env=env,
                               capture_output=True, text=True, timeout=120, check=False)
        said = (check.stdout + check.stderr).strip()
        assert check.returncode != 0 and len(said.splitlines()) == 1, said
        assert "cannot be reached" in said and server.endpoint in said and "does not exist" not in said, said

        server = _restart(server)
        monkeypatch.setenv("EVOSYN_LOCAL_HOME", str(tmp_path / "lh"))
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        out, _ = run(root, "run", "--resume", run_id, "--quiet")
        got_id, got = _digests(root)
        assert got_id == run_id and [t for t in TABLES if got[t] != want[t]] == []
    finally:
        s3server.stop(server)


PG_CONFIG = "domain: airline\nrounds: 2\nbudget: 36\nseed: 7\ntest_size: 10\nchunk_size: 6\n"


def _stack_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "EVOSYN_HOME": str(home), "EVOSYN_SERVICE_RETRY_S": str(RETRY_S)}
    for var in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "EVOSYN_DB"):
        env.pop(var, None)
    return env


@pytest.mark.slow
def test_postgresql_killed_under_evosyn_up_is_one_line_within_the_budget_and_resumes_row_identically(tmp_path):
    """`evosyn up --db local`: the Prefect server keeps its tables in PostgreSQL; PostgreSQL SIGKILLed mid-run."""
    import shutil

    from evosyn.agents.servers import stop as stop_process
    from evosyn.flows.services import alive, family, load_state

    from tests.flows.test_e2e_ui import cli, free_ports
    from tests.postgres_server import reachable_dir

    base = reachable_dir("evosyn-test-outage-")  # initdb runs as `postgres` under root: not in pytest's 0700 tmp
    home = base / "home"
    env = _stack_env(home)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(PG_CONFIG)
    local = tmp_path / "local-store"
    run(local, "run", "--config", str(cfg), "--quiet")
    run_id, want = _digests(local, n=10)

    prefect_port, mlflow_port = free_ports(2)
    up = ["up", "--db", "local", "--prefect-port", str(prefect_port), "--mlflow-port", str(mlflow_port), "--pool",
          "cpu", "--timeout", "300"]
    try:
        cli(env, *up, timeout=600)
        pg = load_state(home)["postgres"].pid
        p = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg), "--quiet"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while not list(home.glob(f"tables/evaluations/run_id={run_id}/round=1/*.parquet")):
                assert p.poll() is None and time.monotonic() < deadline, "the run ended before round 1 evaluated"
                time.sleep(0.1)
            os.kill(pg, signal.SIGKILL)
            killed = time.monotonic()
            out, err = p.communicate(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
        took = time.monotonic() - killed
        lines = [line for line in (out + err).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("error:")]
        assert p.returncode == 1, err[-3000:]
        assert "Traceback" not in err and "Error logging to API" not in err and "| ERROR" not in err, err[-3000:]
        assert len(errors) == 1 and errors == [lines[-1]], lines[-10:]
        assert f"the Prefect server at http://127.0.0.1:{prefect_port} stopped answering" in errors[0], errors[0]
        assert f"--resume {run_id}" in errors[0], errors[0]
        assert took < 30 + 3 * RETRY_S, f"the run ended {took:.0f}s after PostgreSQL was killed"

        # the stack again (the cluster's data is kept), then --resume: the rows of the uninterrupted run
        cli(env, "down", timeout=300)
        cli(env, *up, timeout=600)
        cli(env, "run", "--resume", run_id, "--quiet", timeout=600)
        got_id, got = _digests(home, n=10)
        assert got_id == run_id and [t for t in TABLES if got[t] != want[t]] == []
    finally:
        recorded = {s.pid for s in load_state(home, lenient=True).values()}
        everything = family(recorded) | recorded
        subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "down"], env=env, capture_output=True, text=True,
                       timeout=300, check=False)
        for pid in [p for p in everything if alive(p)]:
            stop_process(pid, grace=5)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def failing_server():
    """An HTTP server on 127.0.0.1 that answers every request 500, as an MLflow server whose database is gone."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Failing(BaseHTTPRequestHandler):
        def _fail(self):
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _fail

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def test_an_mlflow_server_that_answers_500_is_given_up_within_the_budget(tmp_path, monkeypatch, failing_server):
    """MLflow's own client retries a 5xx for about four minutes (7 retries, waits 2..128 s); the budget bounds it."""
    from evosyn.storage.tracking import Tracker, server_down_line

    monkeypatch.setenv("EVOSYN_SERVICE_RETRY_S", "3")
    for var in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        Tracker(tmp_path, failing_server)
    assert time.monotonic() - t0 < 15
    line = server_down_line(failing_server, info.value)
    assert line is not None and line.startswith(f"the MLflow server at {failing_server} stopped answering"), line
    assert "EVOSYN_SERVICE_RETRY_S" in line
