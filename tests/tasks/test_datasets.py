"""The fixed test set: built once per store, also when several runs start on a fresh store together."""
from __future__ import annotations

import multiprocessing as mp

WORKERS = 3
N = 10


def _build(root: str, barrier, results) -> None:
    import storage.offline  # noqa: F401
    import tasks.synth
    from storage.store import Store
    from tasks.datasets import test_cases

    builds = []
    real = tasks.synth.write_pass

    def counted(*args, **kwargs):  # the real write, counted: how many processes built the set
        builds.append(1)
        return real(*args, **kwargs)

    tasks.synth.write_pass = counted
    try:
        store = Store(root)
        barrier.wait(timeout=120)
        cases = test_cases(store, n=N)
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
