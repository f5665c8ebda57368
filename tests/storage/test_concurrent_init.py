"""Three processes opening one fresh store at the same moment: all succeed, the store stays consistent.

Each worker is a real spawned process; a barrier releases all three into the first use of a root
together (where MLflow builds its sqlite schema), on several fresh roots in a row.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import threading

import pytest

WORKERS = 3
ROOTS = 3


def _first_use(roots: list, barrier, results, worker: int, at_create=None) -> None:
    import evosyn.storage.offline  # noqa: F401
    from evosyn.storage.store import Store
    from evosyn.storage.tracking import Tracker
    from tests.storage.samples import samples

    if at_create is not None:  # hold every process that found no experiment until all did: the race, made sure
        from mlflow.tracking import MlflowClient

        real = MlflowClient.create_experiment

        def create_together(self, *args, **kwargs):
            try:
                at_create.wait(timeout=10)
            except threading.BrokenBarrierError:  # the others found it created: nothing to race
                pass
            return real(self, *args, **kwargs)

        MlflowClient.create_experiment = create_together
    run = samples()["runs"]
    for root in roots:
        if isinstance(root, tuple):  # (root, uri): a tracking store shared by several roots
            root, uri = root
        else:
            uri = None
        try:
            barrier.wait(timeout=120)
            store = Store(root)  # schema files and catalog.duckdb
            tracker = Tracker(root, uri)  # MLflow schema and experiment
            run_id = f"run-{worker}"
            store.write([run.model_copy(update={"run_id": run_id})], "run")
            parent = tracker.start_run(run.model_copy(update={"run_id": run_id}))
            tracker.log_metrics(parent, {"success_test": 0.5 + worker}, step=1)
            tracker.finish(parent)
            results.put((root, worker, "ok"))
        except Exception as exc:  # reported to the test, which names the crash
            results.put((root, worker, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"))


def _run_workers(roots, race_create: bool = False) -> None:
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(WORKERS), ctx.Queue()
    at_create = ctx.Barrier(WORKERS) if race_create else None
    procs = [ctx.Process(target=_first_use, args=(roots[w], barrier, results, w, at_create))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    outcomes = []
    try:
        for _ in range(sum(map(len, roots))):
            outcomes.append(results.get(timeout=240))
    except queue.Empty:
        pytest.fail(f"workers reported only {len(outcomes)} outcomes: {outcomes}")
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    crashed = [o for o in outcomes if o[2] != "ok"]
    assert not crashed, crashed


def test_three_processes_on_a_fresh_store_all_succeed(tmp_path):
    import duckdb
    from mlflow.tracking import MlflowClient

    from evosyn.storage.catalog import CATALOG_FILE
    from evosyn.storage.records import TABLES
    from evosyn.storage.tracking import EXPERIMENT, default_tracking_uri

    roots = [str(tmp_path / f"root{i}") for i in range(ROOTS)]
    _run_workers([roots] * WORKERS)

    for root in roots:
        client = MlflowClient(tracking_uri=default_tracking_uri(root))
        experiments = client.search_experiments()
        assert [e.name for e in experiments if e.name == EXPERIMENT] == [EXPERIMENT]
        exp = client.get_experiment_by_name(EXPERIMENT)
        runs = client.search_runs([exp.experiment_id])
        assert sorted(r.data.tags["evosyn.run_id"] for r in runs) == [f"run-{w}" for w in range(WORKERS)]
        assert sorted(r.data.metrics["success_test"] for r in runs) == [0.5 + w for w in range(WORKERS)]
        assert {r.info.status for r in runs} == {"FINISHED"}
        con = duckdb.connect(f"{root}/{CATALOG_FILE}", read_only=True)
        try:
            views = {v for (v,) in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
            assert views == set(TABLES)
            assert con.execute("select count(*) from runs").fetchone() == (WORKERS,)
        finally:
            con.close()


def test_roots_sharing_one_tracking_store_create_the_experiment_once(tmp_path):
    """Locks are per root: runs of different roots on one tracking store race to create the experiment."""
    from mlflow.tracking import MlflowClient

    from evosyn.storage.tracking import EXPERIMENT

    uris = [f"sqlite:///{tmp_path / 'shared.db'}"]
    for uri in uris:  # the schema exists already, as on a tracking server
        MlflowClient(tracking_uri=uri).search_experiments()
    _run_workers([[(str(tmp_path / f"w{w}-{i}"), uri) for i, uri in enumerate(uris)] for w in range(WORKERS)],
                 race_create=True)
    for uri in uris:
        client = MlflowClient(tracking_uri=uri)
        assert [e.name for e in client.search_experiments()].count(EXPERIMENT) == 1
        exp = client.get_experiment_by_name(EXPERIMENT)
        assert len(client.search_runs([exp.experiment_id])) == WORKERS
