"""`evosyn sweep --submit deployment` on a real Prefect server with two real process workers (slow).

The two-worker sweep writes exactly the rows of the same sweep run in one process (table digests), and a
worker SIGKILLed mid-run leaves a run that the other worker finishes row-identically when the sweep is run
again. Every process the module starts is stopped and checked gone at its end, also after a failing test.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from evosyn.benchmarks.sweep_stack import WorkerStack
from evosyn.flows.services import alive
from evosyn.flows.sweep_workers import STORED, Cell, failed_line, shared_root
from evosyn.config import RunConfig
from evosyn.storage.digest import table_digests
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store

REPO = Path(__file__).resolve().parents[2]
TEST_SIZE = 10
CONFIG = (f"rounds: 1\nbudget: 12\ntest_size: {TEST_SIZE}\nchunk_size: 6\n"
          "sweep:\n  domains: [airline]\n  arms: [evosyn, static]\n  seeds: [0]\n")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, s3_server):
    """A Prefect server (its own database), the deployments, and two workers on the `cpu` pool. The workers
    hold the test S3 server's AWS variables, as a team's workers would, so a sweep may use an ``s3://`` store."""
    root = tmp_path_factory.mktemp("stack")
    s = WorkerStack(root, REPO, workers=2)
    with pytest.MonkeyPatch.context() as env:
        for key, value in s3_server.env().items():
            env.setenv(key, value)
        env.setenv("EVOSYN_LOCAL_HOME", str(tmp_path_factory.mktemp("s3-local")))
        try:
            s.start()
            yield s
        finally:
            pids = {svc.pid for svc in [*s.worker_services, *s.killed]} | ({s.server.pid} if s.server else set())
            left = s.stop()
            assert not left and not [p for p in pids if alive(p)], f"still running after stop: {sorted(left)}"


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "sweep.yaml"
    path.write_text(CONFIG)
    return path


def evosyn(stack, home, *args, timeout=900, **extra) -> subprocess.CompletedProcess:
    env = {**stack.env(), "EVOSYN_HOME": str(home), "PREFECT_API_URL": stack.api, **extra}
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "--home", str(home), *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def digests(home, arm: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The store's run ids (of ``arm`` only, when given) and the digests of their rows and the test sets'."""
    store = Store(home, create=False)
    runs = store.runs()
    sets = [r for r in store.runs(any_table=True) if r not in runs]  # the test sets: no `runs` row
    runs = [r for r in runs if arm is None or f"-{arm}-" in r]
    return runs, table_digests(store, [*runs, *sets])


@pytest.fixture(scope="module")
def serial(stack, config, tmp_path_factory):
    """The same sweep in one process (on the same server, so no temporary one starts)."""
    home = tmp_path_factory.mktemp("serial")
    done = evosyn(stack, home, "sweep", "--config", str(config), "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    return home


def stored_runs(home) -> list:
    try:
        return Store(home, create=False).read_records("runs")
    except Exception:  # no store yet: the worker has not begun
        return []


def sweep_on_workers_equals_serial(stack, home, config, serial) -> subprocess.CompletedProcess:
    """`evosyn sweep --submit deployment` into ``home`` (a folder or an ``s3://`` store): it succeeds, and the store
    holds the serial sweep's runs with their rows (table digests)."""
    done = evosyn(stack, home, "sweep", "--config", str(config), "--submit", "deployment", "--quiet")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    runs, got = digests(home)
    want_runs, want = digests(serial)
    assert runs == want_runs and len(runs) == 2
    assert [t for t in TABLES if got[t] != want[t]] == []
    return done


def worker_runs(stack) -> dict[str, str]:
    """worker name -> its log (a flow run it started: "Flow run '<name>' submitted to infrastructure")."""
    return {svc.url: Path(svc.log).read_text(errors="replace") for svc in stack.worker_services}


def test_the_store_root_every_worker_gets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shared_root(RunConfig(store={"root": "rel/store"})) == str(tmp_path / "rel" / "store")
    assert shared_root(RunConfig(store={"root": "s3://bucket/prefix"})) == "s3://bucket/prefix"  # a URL as given
    monkeypatch.setenv("EVOSYN_HOME", "home-here")
    assert shared_root(RunConfig()) == str(tmp_path / "home-here")
    monkeypatch.setenv("EVOSYN_HOME", "s3://bucket/home")
    assert shared_root(RunConfig()) == "s3://bucket/home"


def test_cells_that_did_not_complete_are_named_with_how_to_finish_them():
    cfg = RunConfig()
    cells = [Cell(cfg, "a-evosyn-s0-1", state="COMPLETED"), Cell(cfg, "a-static-s0-2", state=STORED),
             Cell(cfg, "a-evosyn-s1-3", state="CRASHED", message="exit -9")]
    assert [c.ok for c in cells] == [True, True, False] and all(c.done for c in cells)
    line = failed_line(cells)
    assert line.startswith("sweep: 1 of 3 runs did not complete: a-evosyn-s1-3: crashed (exit -9).")
    assert "Run the same sweep again" in line and "evosyn run --resume RUN_ID" in line
    assert failed_line(cells[:2]) is None and not Cell(cfg, "x", state="RUNNING").done


@pytest.mark.slow
def test_two_workers_write_the_rows_of_the_serial_sweep(stack, config, serial, tmp_path):
    home = tmp_path / "shared"
    done = sweep_on_workers_equals_serial(stack, home, config, serial)
    assert "sweep on evosyn-run/evosyn-run" in done.stdout and done.stdout.count("completed") >= 2
    # each worker takes one flow run at a time (--limit 1): the two cells ran on the two workers
    took = {name: log.count("submitted to infrastructure") for name, log in worker_runs(stack).items()}
    assert sorted(took.values()) == [1, 1], took
    again = evosyn(stack, home, "sweep", "--config", str(config), "--submit", "deployment", "--quiet")
    assert again.returncode == 0 and again.stderr.count("is finished in the store; not submitted") == 2, \
        again.stderr[-2000:]


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_finished_by_the_other(stack, config, serial, tmp_path):
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType

    home = tmp_path / "killed"
    cfg = tmp_path / "one.yaml"
    cfg.write_text(CONFIG.replace("arms: [evosyn, static]", "arms: [evosyn]"))
    env = {**stack.env(), "EVOSYN_HOME": str(home), "PREFECT_API_URL": stack.api}
    sweep = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "--home", str(home), "sweep", "--config", str(cfg),
                              "--submit", "deployment", "--quiet"], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # mid-run: the run has its row (running), and its flow run names its process (infrastructure_pid)
        deadline = time.monotonic() + 300
        while True:
            assert time.monotonic() < deadline, "the run never started on a worker"
            rows = stored_runs(home)
            if rows and rows[0].status == "running":
                with SyncPrefectClient(stack.api) as client:
                    running = client.read_flow_runs(flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=["RUNNING"]))))
                running = [r for r in running if r.infrastructure_pid and r.parameters.get("run_id") == rows[0].run_id]
                if running:
                    break
            time.sleep(0.5)
        lost = running[0]
        killed = stack.kill_worker_running(lost.id)
        assert not alive(killed.pid)
        assert Store(home, create=False).read_records("runs")[0].status != "finished", "the run ended before the kill"
    finally:
        sweep.kill()  # it waits on a flow run whose process is gone; that run stays RUNNING in Prefect
        sweep.wait(timeout=30)
    again = evosyn(stack, home, "sweep", "--config", str(cfg), "--submit", "deployment", "--quiet")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    runs, got = digests(home)
    want_runs, want = digests(serial, arm="evosyn")
    assert runs == want_runs and len(runs) == 1
    assert Store(home, create=False).read_records("runs")[0].status == "finished"
    assert [t for t in TABLES if got[t] != want[t]] == []
    # the lost worker's flow run no longer reads RUNNING: the sweep that finished the run marked it crashed
    assert f"flow run {lost.name} of {runs[0]} marked crashed" in again.stderr, again.stderr[-2000:]
    with SyncPrefectClient(stack.api) as client:
        assert client.read_flow_run(lost.id).state.type.value == "CRASHED"


@pytest.mark.slow
def test_two_workers_on_an_s3_store_write_the_rows_of_the_serial_sweep(stack, config, serial, s3_server):
    """The same sweep on an ``s3://`` store shared by the workers: the rows of the serial sweep on a local folder."""
    import uuid

    sweep_on_workers_equals_serial(stack, f"s3://{s3_server.shared}/{uuid.uuid4().hex[:12]}/sweep", config, serial)
