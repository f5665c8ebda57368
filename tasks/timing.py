"""Where a run's time goes, measured from inside the process: each Prefect task beside the function it wraps.

Off unless ``EVOSYN_TIMING`` names a JSON file (``evosyn bench run`` sets it for the run it starts); when
off, a span costs one dictionary lookup. Span kinds:

- ``task``: a Prefect task call (or a mapped group of them) at its call site in the flow: engine included;
- ``fn``: the pure stage function inside that task (``evosyn.tasks.stages`` / ``evosyn.tasks.loop``);
- ``flow`` / ``body``: a flow call at its call site, and the flow function's own body;
- ``own``: other work of ours outside the tasks (the test set, metrics, artifacts, tracking, the store),
  recorded by whoever wraps it (``benchmarks/run_child.py``).

Each span keeps its wall interval (``time.perf_counter``), the CPU of its thread (``time.thread_time``:
the pure function alone, even while other threads run) and of the process (``time.process_time``: the
Prefect engine's background threads included). ``benchmarks/run.py`` turns them into the stage table:
orchestration is a task's wall (CPU) minus the wall (CPU) of the functions it wraps.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "EVOSYN_TIMING"

_lock = threading.Lock()
_spans: list[dict] = []
_marks: dict[str, dict] = {}
_stack = threading.local()  # "kind:name" of this thread's open spans: a store write inside a stage is nested


def enabled() -> bool:
    return bool(os.environ.get(ENV))


@contextmanager
def span(kind: str, name: str, round: int = 0) -> Iterator[None]:
    """Record how long the block took (wall, thread CPU, process CPU) as a ``kind`` span named ``name``."""
    if not os.environ.get(ENV):
        yield
        return
    if not hasattr(_stack, "kinds"):
        _stack.kinds = []
    under = tuple(_stack.kinds)
    _stack.kinds.append(f"{kind}:{name}")
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    try:
        yield
    finally:
        t1, c1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
        _stack.kinds.pop()
        with _lock:
            _spans.append({"kind": kind, "name": name, "round": round, "start": t0, "end": t1, "cpu": c1 - c0,
                           "pstart": p0, "pcpu": p1 - p0, "under": list(under), "thread": threading.get_ident()})


def mark(name: str) -> None:
    """The first time the process reached ``name`` (wall and process CPU)."""
    if os.environ.get(ENV):
        with _lock:
            _marks.setdefault(name, {"at": time.perf_counter(), "pcpu": time.process_time()})


def recorded() -> dict:
    with _lock:
        return {"spans": list(_spans), "marks": dict(_marks)}


def dump(path: str | os.PathLike[str] | None = None, **extra) -> Path | None:
    """Write what was recorded (plus ``extra``) to ``path`` (default: ``$EVOSYN_TIMING``)."""
    target = path or os.environ.get(ENV)
    if not target:
        return None
    from evosyn.storage import atomic

    atomic.write_json(Path(target), {**recorded(), **extra})
    return Path(target)


def load(path: str | os.PathLike[str]) -> dict:
    return json.loads(Path(path).read_text())
