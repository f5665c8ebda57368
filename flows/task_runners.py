"""The Prefect task runner a round fans its chunk tasks out on (the run config's ``task_runner``).

``thread`` (the default): Prefect's ``ThreadPoolTaskRunner`` in the run's own process, two threads, as
rounds always ran. ``dask``: prefect-dask's ``DaskTaskRunner``; with ``dask_address`` it submits to that
running scheduler (a cluster a team already runs), without one it starts a ``distributed.LocalCluster`` of
``concurrency`` worker processes (one thread each) for the round and closes it at the round's end.

What goes to the runner: the mapped chunk tasks of generate, rollout and verify (``flows/round.py``); the
other stages are called directly and run in the round's process. A chunk task gets its arguments pickled
(cloudpickle) to the Dask worker and writes its chunk to the store itself, so a worker must reach the same
store root (a shared folder or object storage); its stage events go to that worker's process, so the run's
terminal shows a round's stages only when they end in the run's process. Every stage is a pure function over
the store keyed by its inputs, so where a chunk runs changes no row (tests/flows/test_task_runners.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from evosyn.config import RunConfig

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

THREAD_WORKERS = 2  # the round's threads, as rounds always ran (the run config's default)


class TaskRunnerMissing(RuntimeError):
    """``task_runner: dask`` without prefect-dask installed (one line, naming the extra)."""


def check_task_runner(cfg: RunConfig) -> None:
    """Before any work: ``task_runner: dask`` needs prefect-dask (and so distributed) importable."""
    if cfg.task_runner != "dask":
        return
    try:
        import prefect_dask  # noqa: F401
    except ImportError:
        raise TaskRunnerMissing("task_runner: dask needs prefect-dask: pip install 'evosyn[dask]' "
                                "(or set task_runner: thread)") from None


def task_runner_for(cfg: RunConfig) -> "TaskRunner":
    """A fresh task runner for one round of ``cfg`` (a runner is entered once per flow run)."""
    from prefect.task_runners import ThreadPoolTaskRunner  # here: the CLI checks the config before Prefect loads

    if cfg.task_runner == "thread":
        return ThreadPoolTaskRunner(max_workers=THREAD_WORKERS)
    check_task_runner(cfg)
    from prefect_dask import DaskTaskRunner

    if cfg.dask_address:
        return DaskTaskRunner(address=cfg.dask_address)
    # processes, not threads: the point is more than one core for the CPU-bound embedded stages;
    # no dashboard: its port would collide between concurrent runs on one machine
    return DaskTaskRunner(cluster_class="distributed.LocalCluster",
                          cluster_kwargs={"n_workers": cfg.concurrency, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})
