"""One synthesis pass: design -> plan -> generate -> rollout -> verify (-> repair), written to the store.

Pure orchestration over the role interfaces; the Prefect round (``flows/round.py``)
wraps the same stage functions as tasks. Chunk ids are derived from the run,
round and chunk index, so rerunning a pass rewrites the same files.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from agents.designer import ColdStart, Designer, EmbeddedDesigner, Steering
from agents.generator import EmbeddedGenerator
from agents.planner import EmbeddedPlanner, PlanError, Planner
from agents.repair import EmbeddedRepair
from agents.synthesis import Candidate, rejection_verdict, synthesize, unplanned
from agents.teacher import EmbeddedTeacher
from envs.registry import get_domain
from storage.records import Blueprint, Direction, SynthesisSpace
from storage.store import Store


@dataclass
class PassResult:
    directions: list[Direction] = field(default_factory=list)
    blueprints: list[Blueprint] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    plan_rejections: list[tuple[Direction, str]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=Counter)

    @property
    def kept(self) -> list[Candidate]:
        return [c for c in self.candidates if c.kept]


def design_and_plan(space: SynthesisSpace, budget: int, *, run_id: str, round: int, seed: int,
                    steering: Steering | None = None, designer: Designer | None = None,
                    planner: Planner | None = None, result: PassResult | None = None) -> PassResult:
    result = result or PassResult()
    t0 = time.perf_counter()
    result.directions = (designer or EmbeddedDesigner()).design(space, steering or ColdStart(), budget,
                                                                run_id=run_id, round=round, seed=seed)
    t1 = time.perf_counter()
    planner = planner or EmbeddedPlanner()
    for d in result.directions:
        for i in range(d.n_blueprints):
            try:
                result.blueprints.append(planner.plan(d, space, None, index=i, seed=seed))
            except PlanError as exc:
                result.plan_rejections.append((d, str(exc)))
    result.seconds["design"] += t1 - t0
    result.seconds["plan"] += time.perf_counter() - t1
    return result


def synthesize_all(space: SynthesisSpace, blueprints: Iterable[Blueprint], domain: str,
                   result: PassResult, progress: Callable[[int], None] | None = None) -> PassResult:
    t0 = time.perf_counter()
    dom = get_domain(domain)
    result.seconds["load environment"] += time.perf_counter() - t0
    generator, teacher = EmbeddedGenerator(dom), EmbeddedTeacher(dom)
    repair = EmbeddedRepair(dom, teacher)
    for bp in blueprints:
        cand = synthesize(bp, space, generator, teacher, repair)
        result.candidates.append(cand)
        result.seconds.update(cand.seconds)
        if progress:
            progress(1)
    return result


def write_pass(store: Store, result: PassResult, chunk: str, diagnostic_fraction: float | None = None,
               seed: int = 0, after_write: Callable[[str], None] | None = None) -> None:
    """Every record of the pass as chunk ``chunk`` of its table (a rewrite replaces it).

    With ``diagnostic_fraction``, the kept trajectories also become SFT examples,
    a seeded share of them held out as the round's diagnostic set. The tables
    are written one after another, so a caller that needs the pass to be whole
    marks it complete after this returns; ``after_write(table)`` runs after each
    table's write (a fault-injection hook).
    """
    t0 = time.perf_counter()
    if diagnostic_fraction is not None:
        from pipeline.datasets import sft_examples

        examples = sft_examples([(c.task, c.final) for c in result.kept], diagnostic_fraction, seed)
        if examples:
            store.write(examples, chunk)
    tasks = [c.task for c in result.candidates if c.task is not None]
    trajectories = [t for c in result.candidates for t in c.trajectories]
    verdicts = [v for c in result.candidates for v in c.verdicts]
    verdicts += [rejection_verdict(unplanned(d, n), "plan", reason)
                 for n, (d, reason) in enumerate(result.plan_rejections)]
    for records in (result.directions, result.blueprints, tasks, trajectories, verdicts):
        if records:
            store.write(records, chunk)
            if after_write:
                after_write(type(records[0]).table)
    result.seconds["write"] += time.perf_counter() - t0


def summary(result: PassResult) -> tuple[Counter, Counter]:
    """(kept / total by family and outcome, rejection reasons)."""
    by_slice: Counter = Counter()
    reasons: Counter = Counter()
    for c in result.candidates:
        sel = c.blueprint.selected_dimensions
        key = (sel["task_family"][0], sel["expected_outcome"][0])
        by_slice[(key, "total")] += 1
        if c.kept:
            by_slice[(key, "kept")] += 1
        else:
            reasons[c.rejection.split(":")[0] if c.rejection.startswith("infeasible") else c.rejection[:90]] += 1
    for _, reason in result.plan_rejections:
        reasons["plan: " + reason[:80]] += 1
    return by_slice, reasons
