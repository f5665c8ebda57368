"""What every stage's Prefect task shares: the task options, the emitter, and the in-process event bus.

A stage function (``evosyn.tasks.stages``, ``evosyn.tasks.loop``, ``evosyn.tasks.checkpoint``, ``evosyn.tasks.official_agents``) is pure over
the store and takes an ``emit`` callback; beside it sits its Prefect task, which adds only what the engine brings:
a named, logged task run. ``emitter()`` logs each ``StageEvent`` to the task run and hands it to ``publish``,
which passes it to whoever ``listening`` registered for its run id in this process (the CLI's renderer, the
round flow's stage totals). A deployment run has no listener; its tasks log the same lines to Prefect.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prefect import get_run_logger
from prefect.cache_policies import NO_CACHE

from evosyn.tasks.progress import Emit, StageEvent, event_line

# Every stage resumes from its own chunks in the store (tasks/stages.py), so Prefect neither hashes a task's
# inputs into a cache key (the default policy serializes every blueprint, task and trajectory passed in) nor
# persists its result: a task run is a visible, logged step and nothing more.
STAGE_TASK = {"cache_policy": NO_CACHE, "persist_result": False}

_lock = threading.Lock()
_listeners: dict[str, list[Callable[[StageEvent], None]]] = {}


@contextmanager
def listening(run_id: str, listener: Callable[[StageEvent], None] | None) -> Iterator[None]:
    """``listener`` gets every event of run ``run_id`` published in this process while the block runs."""
    if listener is None:
        yield
        return
    with _lock:
        _listeners.setdefault(run_id, []).append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners[run_id].remove(listener)
            if not _listeners[run_id]:
                del _listeners[run_id]


def publish(event: StageEvent) -> None:
    with _lock:
        listeners = list(_listeners.get(event.run_id, ()))
    for listener in listeners:
        listener(event)


def emitter() -> Emit:
    """Inside a task: each event logged to its task run, then published to this process's listeners."""
    logger = get_run_logger()

    def emit(ev: StageEvent) -> None:
        logger.info(event_line(ev))
        publish(ev)
    return emit
