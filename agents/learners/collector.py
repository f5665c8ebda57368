"""Python's cyclic garbage collector paused over one measured hot loop: the embedded learner's training
(agents/learners/embedded.py ``fit``), the only place the project touches the collector."""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = True


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block; reference counting still frees everything that is not a cycle.

    Training allocates millions of tuples and candidates that live for a decision or longer, and the full
    collections they trigger walk every object the process holds (a synthesis pass, its trajectories, the
    models): measured, 12% of training CPU (one full collection about 0.3 s); measured again once the other
    gc tricks were gone, fitting round 3 of ``evosyn run --domain airline --rounds 3 --seed 0`` (452
    trajectories): 11.2-11.4 s of CPU paused, 12.5-13.0 s not (two runs each, a shared 2-core machine).
    Training makes almost no cycles (65 objects on 300 trajectories), and those are collected once the
    collector runs again. Nested and concurrent blocks share one pause: it ends with the last of them, and
    only a collector that was on before the first is turned back on.
    """
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
