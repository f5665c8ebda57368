"""`evosyn run` SIGKILLed at a stage boundary, then `--resume`d: every table equals an uninterrupted run (slow)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import evosyn.tasks.testset as testset
from evosyn.storage.digest import table_digests
from evosyn.storage.faults import AFTER_ENV, ENV, FULL_ENV
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from evosyn.envs.packs import get_domain
from tests.flows.test_run import PREFECT_HOME, config, run, start

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

pytestmark = pytest.mark.slow
TEST_SIZE = 30  # tests/flows/test_run.py's CONFIG


def digests(home):
    store = Store(home, create=False)
    (run_id,) = store.runs()
    return run_id, table_digests(store, [run_id, testset.test_set_run_id(get_domain("airline"), n=TEST_SIZE)])


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cfg")
    cfg = config(tmp, seed=5)
    run(tmp / "clean", "run", "--config", str(cfg))
    return cfg, digests(tmp / "clean")


@pytest.mark.parametrize("kill", ["generate", "testset"])
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, clean, kill):
    cfg, (run_id, want) = clean
    home = tmp_path / "killed"
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME, ENV: kill,
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    # its own session, reaped here (the temporary Prefect server it started dies with it: flows/prefect_api.py)
    p = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert p.wait(timeout=600) == -signal.SIGKILL, f"not killed at {kill}"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    run(home, "run", "--resume", run_id)
    got_id, got = digests(home)
    assert got_id == run_id
    assert [t for t in TABLES if got[t] != want[t]] == []


def test_sigkill_mid_verify_then_resume_equals_an_uninterrupted_run(tmp_path, clean):
    """Killed at no boundary: half a second after the first verdict chunk of round 1 appears."""
    cfg, (run_id, want) = clean
    killed = tmp_path / "killed"
    p = start(killed, "run", "--config", str(cfg))
    deadline = time.time() + 300
    part = killed / "tables" / "verdicts"
    while time.time() < deadline and p.poll() is None and not any(part.glob("run_id=*/round=1/chunk-*.parquet")):
        time.sleep(0.2)
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert any(part.glob("run_id=*/round=1/*.parquet")), "the run was killed before writing anything"
    run(killed, "run", "--resume", run_id)
    got_id, got = digests(killed)
    assert got_id == run_id and [t for t in TABLES if got[t] != want[t]] == []


def _killed(home, cfg, **env):
    full = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300", **env}
    p = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg)], env=full,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=600)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return p.returncode, err


@pytest.mark.parametrize("zone,after", [("mlflow-init", "0.3"), ("catalog-init", "0")])
def test_a_kill_inside_a_first_time_initialisation_then_a_rerun_equals_an_uninterrupted_run(tmp_path, clean, zone,
                                                                                           after):
    """Killed while MLflow builds its database or DuckDB its catalog: the rerun (a plain one: the run row may
    not exist yet) finishes with every row of the uninterrupted run."""
    cfg, (run_id, want) = clean
    home = tmp_path / "killed"
    code, _ = _killed(home, cfg, **{ENV: zone, AFTER_ENV: after})
    assert code == -signal.SIGKILL, f"not killed in {zone}"
    run(home, "run", "--config", str(cfg))
    got_id, got = digests(home)
    assert got_id == run_id and [t for t in TABLES if got[t] != want[t]] == []


def test_a_full_disk_while_mlflow_builds_its_database_is_one_line_then_the_rerun_equals_an_uninterrupted_run(
        tmp_path, clean):
    cfg, (run_id, want) = clean
    home = tmp_path / "full"
    code, err = _killed(home, cfg, **{FULL_ENV: "mlflow-init"})
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and "Traceback" not in err, err[-2000:]
    assert lines[-1].startswith("error:") and "disk" in lines[-1]
    assert not (home / "mlflow.db").exists()
    run(home, "run", "--resume", run_id)
    got_id, got = digests(home)
    assert got_id == run_id and [t for t in TABLES if got[t] != want[t]] == []


DAMAGE = ("deleted", "truncated", "corrupted")


def _damage(path, how):
    if how == "deleted":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("rebuild", ["resume", "repair"])
def test_a_deleted_truncated_and_corrupted_chunk_in_three_tables_is_named_then_rebuilt(tmp_path, clean, rebuild):
    """A finished run; in each of tasks, trajectories and verdicts one chunk file deleted, one truncated, one
    corrupted: `store check` names the nine in one line each; `run --resume`, or `store check --repair` (which
    resumes the run itself), rebuilds them row-identically and the run stays finished; then `store check` is
    clean."""
    import shutil

    cfg, (run_id, _) = clean
    home = tmp_path / "damaged"
    shutil.copytree(cfg.parent / "clean", home)
    _, want = digests(home)  # the copy before the damage (its stored config names the first root)
    store = Store(home, create=False)
    damaged = []
    for table in ("tasks", "trajectories", "verdicts"):
        files = [p for p in store.files(table, run_id=run_id, round=1) if p.stem.startswith(("gen-", "chunk-"))]
        for how, path in zip(DAMAGE, files[:3]):
            _damage(path, how)
            damaged.append(path)
    assert len(damaged) == 9
    p = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "store", "check"], capture_output=True, text=True,
                       env={**os.environ, "EVOSYN_HOME": str(home)}, timeout=300)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    named = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert len(named) == 9 and all(any(str(d) in ln for ln in named) for d in damaged)
    if rebuild == "resume":
        run(home, "run", "--resume", run_id)
    else:
        out, _ = run(home, "store", "check", "--repair")
        assert f"resuming {run_id}" in out and "repaired: 9 problem(s)" in out, out
    got_id, got = digests(home)
    assert [t for t in TABLES if got[t] != want[t]] == []
    assert Store(home, create=False).read_records("runs", run_id=run_id)[0].status == "finished"
    p = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "store", "check"], capture_output=True, text=True,
                       env={**os.environ, "EVOSYN_HOME": str(home)}, timeout=300)
    assert p.returncode == 0 and p.stdout.startswith("ok:")
