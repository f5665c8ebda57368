"""`evosyn run` on an s3:// store (a real SeaweedFS, tests/s3server.py) as a user runs it: the same rows as on a
local folder, a SIGKILL then `--resume` row-identical, `evosyn query` and `evosyn store check` on both (slow)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from evosyn.storage import objectstore
from evosyn.storage.digest import table_digests
from evosyn.storage.faults import ENV
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from evosyn.tasks import testset
from evosyn.envs.packs import get_domain
from tests.flows.test_run import PREFECT_HOME, run

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

pytestmark = pytest.mark.slow
CONFIG = "domain: airline\nrounds: 1\nbudget: 12\nseed: 4\ntest_size: 10\nchunk_size: 6\n"
QUERY = "select round, task_set, count(*) as n, avg(success::int) as success from evaluations group by all order by all"


def digests(location):
    store = Store(location, create=False)
    (run_id,) = store.runs()
    return run_id, table_digests(store, [run_id, testset.test_set_run_id(get_domain("airline"), n=10)])


def _local(monkeypatch, tmp_path, name):
    """Each S3 run its own local folder: nothing of one run (models, caches) is there for the other."""
    monkeypatch.setenv("EVOSYN_LOCAL_HOME", str(tmp_path / f"local-{name}"))


def test_a_run_on_s3_equals_the_run_on_a_local_folder_and_resumes_row_identically(tmp_path, s3_root, monkeypatch):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    local = tmp_path / "local-store"
    run(local, "run", "--config", str(cfg), "--quiet")
    run_id, want = digests(local)

    # on S3, SIGKILLed inside round 1's generate stage, then --resume (its lease is a dead process's: taken over at
    # once) from another local folder: the rows of the uninterrupted run on the local folder. One S3 run shows
    # both (an S3 run equals a local one, a resume on S3 is row-identical) at half the CPU of a clean run beside it
    killed = s3_root
    _local(monkeypatch, tmp_path, "killed")
    env = {**os.environ, "EVOSYN_HOME": killed, "PREFECT_HOME": PREFECT_HOME, ENV: "generate",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    p = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert p.wait(timeout=600) == -signal.SIGKILL, "not killed at generate"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _local(monkeypatch, tmp_path, "resumed")  # as if another machine resumed it: no local file of the first
    out, _ = run(killed, "run", "--resume", run_id, "--quiet")
    assert f"store: {s3_root}" in out
    got_id, got = digests(killed)
    assert got_id == run_id and [t for t in TABLES if got[t] != want[t]] == []
    assert not list((tmp_path / "local-resumed").rglob("tables"))  # the rows are on S3, not in the local folder

    # `evosyn query`: the same rows from both stores (DuckDB over pyarrow datasets of the objects, and its globs)
    assert run(killed, "query", QUERY)[0] == run(local, "query", QUERY)[0]
    out, _ = run(killed, "store", "check")
    assert out.strip() == f"ok: {s3_root}: every chunk matches its marker"

    # a damaged object is named by `store check` (exit 1)
    store = Store(killed, create=False)
    path = store.files("trajectories", run_id, 1)[0]
    objectstore.put(path, path.read_bytes()[:-30])
    check = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "--home", killed, "store", "check"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert check.returncode == 1 and f"{path}: truncated or not Parquet" in check.stdout, check.stdout
