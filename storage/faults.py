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
"""
from __future__ import annotations

import os
import signal

ENV = "EVOSYN_FAULT_KILL_AT"
POINTS = ("design", "plan", "generate", "rollout", "verify", "dedup", "train", "evaluate", "testset", "reflect")


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
