"""Deliberate crash points, for testing that every stage resumes cleanly (`evosyn bench faults`).

Set ``EVOSYN_FAULT_KILL_AT=<point>`` (or ``<point>@<round>``) and the process
SIGKILLs itself the first time it reaches that point: no cleanup, no
``finally``, exactly like an OOM kill or a pulled plug. Unset (the default),
``kill_point`` does nothing. Each point sits where a crash hurts most: inside
the stage, after some of its output is on disk and before the stage is marked
complete.

=========  ==============================================================================
point      where the process dies
=========  ==============================================================================
design     directions written, design not yet marked complete
plan       plan rejections and blueprints written, plan not yet marked complete
generate   the first finished chunk's tasks written, that chunk not yet marked complete
rollout    the first finished chunk's trajectories written, not yet marked complete
verify     the first finished chunk's verdicts written, its SFT examples not yet written
dedup      a check's rows written (the test sets' first, round 0; then the round's), not yet marked complete
train      mid-training-save: model bytes in the temp file, not yet renamed into place
evaluate   an evaluation's learner trajectories written, its evaluations not yet written
testset    the fixed test set's tasks written, its trajectories and verdicts not yet
reflect    feedback written, probes / reflection / next space not yet written
=========  ==============================================================================

``<point>@<round>`` fires only in that round (``reflect@2``); a bare point fires
at its first occurrence, whatever the round. ``train`` and ``testset`` know no
round, so they take the bare form only.

The first-time initialisations are zones, not points (``fault_zone``): a kill
there fires ``EVOSYN_FAULT_KILL_AFTER_S`` seconds after the zone is entered (0:
at once), from a timer thread, so it lands inside the library's own work;
``EVOSYN_FAULT_FULL_AT=<zone>`` instead makes every file write past
``EVOSYN_FAULT_FULL_BYTES`` (default 64 KiB) fail inside the zone, as a full
disk does (``RLIMIT_FSIZE`` with ``SIGXFSZ`` ignored: the write itself fails).

=============  ==========================================================================
zone           what is being built
=============  ==========================================================================
mlflow-init    the MLflow database (created aside, storage/mlflow_db.py)
catalog-init   the DuckDB catalog file (created aside, storage/catalog.py)
=============  ==========================================================================
"""
from __future__ import annotations

import os
import resource
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "EVOSYN_FAULT_KILL_AT"
AFTER_ENV = "EVOSYN_FAULT_KILL_AFTER_S"
FULL_ENV = "EVOSYN_FAULT_FULL_AT"
FULL_BYTES_ENV = "EVOSYN_FAULT_FULL_BYTES"
ZONES = ("mlflow-init", "catalog-init")
POINTS = ("design", "plan", "generate", "rollout", "verify", "dedup", "train", "evaluate", "testset", "reflect",
          *ZONES)


def parse(spec: str) -> tuple[str, int | None]:
    """``"reflect@2"`` -> ``("reflect", 2)``; an unknown point is refused with the known ones."""
    point, _, rnd = spec.strip().partition("@")
    if point not in POINTS:
        raise ValueError(f"{ENV}={spec!r}: unknown kill point {point!r}; known points: {', '.join(POINTS)}")
    if rnd and not rnd.isdigit():
        raise ValueError(f"{ENV}={spec!r}: the round after '@' must be a number, e.g. {point}@1")
    return point, (int(rnd) if rnd else None)


def kill_point(point: str, round: int | None = None) -> None:
    """SIGKILL this process if ``EVOSYN_FAULT_KILL_AT`` names ``point`` (and ``round``, when it gives one)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    want, want_round = parse(spec)
    if want == point and (want_round is None or want_round == round):
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def fault_zone(zone: str) -> Iterator[None]:
    """The block of a first-time initialisation: killed inside it, or its writes failing, when a fault test
    asks (see the module doc); a no-op otherwise."""
    spec = os.environ.get(ENV)
    if spec and parse(spec)[0] == zone:
        delay = float(os.environ.get(AFTER_ENV) or 0)
        if delay <= 0:
            os.kill(os.getpid(), signal.SIGKILL)
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()
    if os.environ.get(FULL_ENV) != zone or threading.current_thread() is not threading.main_thread():
        yield
        return
    limit = int(os.environ.get(FULL_BYTES_ENV) or 65536)
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # ignored: the write fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, before)
        signal.signal(signal.SIGXFSZ, old_handler)
