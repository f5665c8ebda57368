"""The fixed test set: built once per store (also when several runs start on it together), and a build that
died part way is rebuilt, never taken as built."""
from __future__ import annotations

import multiprocessing as mp

import pytest

import pipeline.testset as testset
from storage.store import Store

N = 8
WORKERS = 3


def _summary(cases):
    return [(c.task.task_id, c.gold_observed) for c in cases]


def test_a_build_that_died_after_its_tasks_is_rebuilt(tmp_path, monkeypatch):
    clean = testset.test_cases(Store(tmp_path / "clean"), n=N)
    assert clean and all(c.gold_observed.get("num_write") for c in clean)  # the test set has observed factors

    store = Store(tmp_path / "crashed")
    real = Store.write

    def die_after_tasks(self, records, chunk_id):
        if records and type(records[0]).table == "trajectories" and records[0].run_id.startswith("testset-"):
            raise RuntimeError("killed between the test set's tasks and its trajectories")
        return real(self, records, chunk_id)

    monkeypatch.setattr(Store, "write", die_after_tasks)
    with pytest.raises(RuntimeError):
        testset.test_cases(store, n=N)
    monkeypatch.setattr(Store, "write", real)
    run_id = testset.test_set_run_id("airline", n=N)
    assert store.count("tasks", run_id=run_id) > 0 and not store.is_complete(testset.TEST_SET_STAGE, run_id, 0)
    # no task verified yet (no observed factors); plan and generate rejections may already be on record
    assert not [v for v in store.read_records("verdicts", run_id=run_id) if v.task_id]

    rebuilt = testset.test_cases(store, n=N)
    assert _summary(rebuilt) == _summary(clean)
    assert store.count("tasks", run_id=run_id) == len(clean)  # rebuilt over the partial build: no duplicates


def test_a_built_test_set_is_reused(tmp_path, monkeypatch):
    store = Store(tmp_path / "s")
    first = testset.test_cases(store, n=N)
    monkeypatch.setattr(testset, "run_pass", lambda *a, **k: pytest.fail("the test set was rebuilt"))
    assert _summary(testset.test_cases(store, n=N)) == _summary(first)



def _build(root: str, barrier, results) -> None:
    import storage.offline  # noqa: F401
    import pipeline.testset as testset
    from storage.store import Store

    builds = []
    real = testset.run_pass

    def counted(*args, **kwargs):  # the real pass, counted: how many processes built the set
        builds.append(1)
        return real(*args, **kwargs)

    testset.run_pass = counted
    try:
        store = Store(root)
        barrier.wait(timeout=120)
        cases = testset.test_cases(store, n=N)
        results.put((len(builds), sorted((c.task.task_id, bool(c.gold_observed)) for c in cases)))
    except Exception as exc:
        results.put((-1, f"{type(exc).__name__}: {exc}"))


def test_concurrent_first_runs_build_the_test_set_once(tmp_path):
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_build, args=(str(tmp_path / "h"), barrier, results)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    got = [results.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(n >= 0 for n, _ in got), got
    assert sum(n for n, _ in got) == 1, f"the test set was built {sum(n for n, _ in got)} times"
    assert got[0][1] and all(cases == got[0][1] for _, cases in got)  # every run reads the same set


def test_the_test_set_is_marked_and_is_no_training_data(tmp_path):
    store = Store(tmp_path / "s")
    cases = testset.test_cases(store, n=N)
    run_id = testset.test_set_run_id("airline", n=N)
    assert store.is_complete(testset.TEST_SET_STAGE, run_id, 0)
    assert cases and all(c.task.source == "test_set" for c in cases)
    assert store.count("sft_examples", run_id=run_id) == 0  # verified, but never an SFT example


def test_a_partial_build_of_the_old_one_chunk_layout_leaves_no_rows_behind(tmp_path):
    clean = Store(tmp_path / "clean")
    cases = testset.test_cases(clean, n=N)
    run_id = testset.test_set_run_id("airline", n=N)
    store = Store(tmp_path / "old")
    store.write(clean.read_records("tasks", run_id=run_id), testset.LEGACY_CHUNK)  # died before its verdicts
    assert _summary(testset.test_cases(store, n=N)) == _summary(cases)
    assert store.count("tasks", run_id=run_id) == clean.count("tasks", run_id=run_id)
