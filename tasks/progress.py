"""Progress of a pass as events: what each stage (or each chunk of it) did, for whoever renders or logs it.

The stage functions (``evosyn.tasks.stages``, ``evosyn.tasks.loop``) emit a
``StageEvent`` when a call finishes (also a call that read its chunk back on a
resume, so a resumed stage still adds up); a ``Tally`` adds the events of a pass
up per (run, round, stage). Nothing here draws anything: the terminal and
Prefect renderers live in ``flows/``.

A stage of chunks emits one event per chunk, without a total: its total is what
the stage before it kept (``FEEDS``), known once that stage has finished.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pydantic import Field, model_validator

from evosyn.storage.records import Contract, Verdict

# the items a stage keeps are the next stage's input
FEEDS = {"plan": "generate", "generate": "rollout", "rollout": "verify"}
# what "kept" means, per stage, in a line
VERBS = {"design": "directions", "plan": "planned", "generate": "built", "rollout": "rolled out", "verify": "kept",
         "train": "trained", "reflect": "reflected"}


class StageEvent(Contract):
    """``done`` more items of a stage finished: ``kept`` of them kept, the others rejected, counted by reason.

    ``total``: the stage's whole input, when the emitter knows it (a stage of one call); None for one chunk of a
    stage whose total is what the stage feeding it kept. ``detail``: what the numbers do not say (a success
    rate, a space change).
    """

    run_id: str
    round: int
    stage: str
    done: int
    kept: int = 0
    rejected: dict[str, int] = Field(default_factory=dict)
    total: int | None = None
    detail: str = ""
    seconds: float = 0.0  # how long the call took: a stage's elapsed time runs from its first call's start

    @model_validator(mode="after")
    def _adds_up(self) -> StageEvent:
        if self.kept + sum(self.rejected.values()) != self.done:
            raise ValueError(f"{self.stage}: kept {self.kept} + rejected {sum(self.rejected.values())} "
                             f"!= done {self.done}")
        return self


Emit = Callable[[StageEvent], None]


def reason(verdict: Verdict) -> str:
    """A rejection's reason as a short label: the failed check (``policy``, ``state``), or for a stage's own
    rejection (plan, generate, rollout) the kind of its message (``infeasible``, ``generator error``)."""
    failed = verdict.failed() or [c for c in verdict.checks if not c.passed]
    if not failed:
        return "unknown"
    check = failed[0]
    if check.name in ("plan", "generate", "rollout"):
        kind = check.reason.split(":", 1)[0].strip()
        return kind[:40] or check.name
    return check.name


def rejections(verdicts: Iterable[Verdict]) -> dict[str, int]:
    return dict(Counter(reason(v) for v in verdicts))


def counts(rejected: dict[str, int], limit: int = 4) -> str:
    """``policy 2, state 1`` (the most frequent first; the rest as ``other N``)."""
    ranked = sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = [f"{k} {n}" for k, n in ranked[:limit]]
    rest = sum(n for _, n in ranked[limit:])
    return ", ".join(shown + ([f"other {rest}"] if rest else []))


def describe(stage: str, done: int, kept: int, rejected: dict[str, int], total: int | None, detail: str = "") -> str:
    """One line: ``verify: 47/50 kept; rejected: policy 2, state 1``."""
    if stage.startswith("evaluate"):
        line = f"{stage}: {detail}" if detail else f"{stage}: {kept}/{done} succeeded"
        return line + (f"; failed: {counts(rejected)}" if rejected else "")
    if stage in ("train", "reflect", "design", "dedup"):
        return f"{stage}: {detail or f'{kept} {VERBS[stage]}'}"
    of = total if total is not None else done
    line = f"{stage}: {kept}/{of} {VERBS.get(stage, 'kept')}"
    if done < of:
        line += f" ({done} done)"
    if rejected:
        line += f"; rejected: {counts(rejected)}"
    return line + (f"; {detail}" if detail else "")


def event_line(ev: StageEvent) -> str:
    return describe(ev.stage, ev.done, ev.kept, ev.rejected, ev.total if ev.total is not None else ev.done,
                    ev.detail)


@dataclass
class StageState:
    """A stage of one round, added up: its totals so far and whether it has finished."""

    run_id: str
    round: int
    stage: str
    done: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)
    total: int | None = None
    total_final: bool = False
    detail: str = ""
    started: float | None = None  # its first event
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished_at or time.monotonic()) - self.started

    def line(self) -> str:
        return describe(self.stage, self.done, self.kept, dict(self.rejected), self.total, self.detail)


class Tally:
    """The events of a pass added up per (run, round, stage); safe to feed from the threads of mapped tasks.

    ``add`` returns the stages that finished with this event, in order: the event's own stage, and the stages
    it feeds whose totals this made final with nothing left to do (a chunk rejected whole upstream).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stages: dict[tuple[str, int, str], StageState] = {}

    def _state(self, run_id: str, round: int, stage: str) -> StageState:
        key = (run_id, round, stage)
        if key not in self.stages:
            self.stages[key] = StageState(run_id, round, stage)
        return self.stages[key]

    def add(self, ev: StageEvent) -> list[StageState]:
        with self._lock:
            st = self._state(ev.run_id, ev.round, ev.stage)
            begun = time.monotonic() - ev.seconds
            st.started = begun if st.started is None else min(st.started, begun)
            st.done += ev.done
            st.kept += ev.kept
            st.rejected.update(ev.rejected)
            st.detail = ev.detail or st.detail
            if ev.total is not None:
                st.total, st.total_final = ev.total, True
            if ev.stage in FEEDS:
                fed = self._state(ev.run_id, ev.round, FEEDS[ev.stage])
                fed.total = (fed.total or 0) + ev.kept
            return self._settle(ev.run_id, ev.round, ev.stage)

    def _settle(self, run_id: str, round: int, stage: str | None) -> list[StageState]:
        out = []
        while stage is not None:
            st = self._state(run_id, round, stage)
            if not st.finished:
                if not st.total_final or st.done < (st.total or 0):
                    break
                st.total = st.total or 0
                st.started = st.started or time.monotonic()
                st.finished_at = time.monotonic()
                out.append(st)
            stage = FEEDS.get(stage)
            if stage is not None:
                self._state(run_id, round, stage).total_final = True
        return out

    def snapshot(self) -> list[StageState]:
        with self._lock:
            return list(self.stages.values())
