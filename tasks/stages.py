"""The eight stages of a round as idempotent functions over the store.

Every stage writes its output as named chunks of its tables and, when those
chunks already exist (a rerun, or a resume after a crash), reads them back
instead of recomputing: a finished stage is a no-op, an interrupted one redoes
only its missing chunks. Chunk names carry a hash of the stage's inputs.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from agents.designer import ColdStart, EmbeddedDesigner, LearnerFeedback, NewFactor, Steering
from agents.generator import EmbeddedGenerator, GenerationError
from agents.planner import EmbeddedPlanner, PlanError
from agents.repair import EmbeddedRepair
from agents.synthesis import rejection_verdict, unplanned, verify_with_repair
from agents.teacher import EmbeddedTeacher
from envs.registry import get_domain
from storage.records import Blueprint, Direction, SFTExample, SynthesisSpace, SynthTask, Trajectory, Verdict
from storage.store import Store

DIAGNOSTIC_FRACTION = 0.2


def _h(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:10]


@dataclass
class Ctx:
    store: Store
    run_id: str
    round: int
    seed: int
    domain: str = "airline"



def design(ctx: Ctx, space: SynthesisSpace, steering: Steering, budget: int, arm: str) -> list[Direction]:
    chunk = f"design-{_h(space.version, steering.kind, budget, arm)}"
    if ctx.store.has_chunk("directions", ctx.run_id, ctx.round, chunk):
        return sorted(ctx.store.read_records("directions", ctx.run_id, ctx.round), key=lambda d: d.condition_id)
    if arm == "single_agent":  # one role: a single unconstrained direction, uniform sampling
        steering = ColdStart()
        dirs = EmbeddedDesigner().design(space, steering, budget, run_id=ctx.run_id, round=ctx.round, seed=ctx.seed)
        dirs = [dirs[0].model_copy(update={"allowed_values": {}, "objective": "any task the space allows",
                                           "n_blueprints": budget, "rationale": "single agent: no designer"})]
    else:
        dirs = EmbeddedDesigner().design(space, steering, budget, run_id=ctx.run_id, round=ctx.round, seed=ctx.seed)
    ctx.store.write(dirs, chunk)
    return dirs


def plan(ctx: Ctx, space: SynthesisSpace, directions: list[Direction]) -> list[Blueprint]:
    chunk = f"plan-{_h(*[d.direction_id for d in directions])}"
    if ctx.store.has_chunk("blueprints", ctx.run_id, ctx.round, chunk):
        return sorted(ctx.store.read_records("blueprints", ctx.run_id, ctx.round), key=lambda b: b.blueprint_id)
    planner, out, rejected = EmbeddedPlanner(), [], []
    for d in directions:
        for i in range(d.n_blueprints):
            try:
                out.append(planner.plan(d, space, None, index=i, seed=ctx.seed + ctx.round))
            except (PlanError, KeyError) as exc:
                rejected.append(rejection_verdict(unplanned(d, i), "plan", str(exc)))
    if rejected:
        ctx.store.write(rejected, chunk)
    ctx.store.write(out, chunk)
    return sorted(out, key=lambda b: b.blueprint_id)


def chunk_name(stage: str, blueprints: list[Blueprint]) -> str:
    return f"{stage}-{_h(*[b.blueprint_id for b in blueprints])}"


def generate(ctx: Ctx, space: SynthesisSpace, blueprints: list[Blueprint]) -> list[SynthTask]:
    chunk = chunk_name("gen", blueprints)
    ids = {b.blueprint_id for b in blueprints}
    if ctx.store.has_chunk("tasks", ctx.run_id, ctx.round, chunk):  # tasks are written last
        return [t for t in ctx.store.read_records("tasks", ctx.run_id, ctx.round) if t.blueprint_id in ids]
    gen = EmbeddedGenerator(get_domain(ctx.domain))
    tasks, rejected = [], []
    for bp in blueprints:
        try:
            tasks.append(gen.generate(bp, space))
        except GenerationError as exc:
            rejected.append(rejection_verdict(bp, "generate", str(exc)))
        except Exception as exc:  # a generator bug costs one blueprint, not the round
            rejected.append(rejection_verdict(bp, "generate", f"generator error: {type(exc).__name__}: {exc}"))
    if rejected:
        ctx.store.write(rejected, chunk)
    if tasks:
        ctx.store.write(tasks, chunk)
    return tasks


def rollout(ctx: Ctx, tasks: list[SynthTask], chunk: str) -> list[Trajectory]:
    if ctx.store.has_chunk("trajectories", ctx.run_id, ctx.round, chunk):
        ids = {t.task_id for t in tasks}
        return [t for t in ctx.store.read_records("trajectories", ctx.run_id, ctx.round)
                if t.task_id in ids and t.attempt == 0]
    teacher = EmbeddedTeacher(get_domain(ctx.domain))
    out = [teacher.rollout(t) for t in tasks]
    if out:
        ctx.store.write(out, chunk)
    return out


def verify_chunk(ctx: Ctx, tasks: list[SynthTask], trajectories: list[Trajectory], chunk: str
                 ) -> tuple[list[Verdict], list[SFTExample]]:
    if ctx.store.has_chunk("sft_examples", ctx.run_id, ctx.round, chunk):  # examples are written last
        ids = {t.task_id for t in tasks}
        verdicts = [v for v in ctx.store.read_records("verdicts", ctx.run_id, ctx.round) if v.task_id in ids]
        examples = [e for e in ctx.store.read_records("sft_examples", ctx.run_id, ctx.round) if e.task_id in ids]
        return verdicts, examples
    dom = get_domain(ctx.domain)
    repair = EmbeddedRepair(dom, EmbeddedTeacher(dom))
    by_task = {t.task_id: t for t in trajectories}
    verdicts, repaired, kept = [], [], []
    for task in tasks:
        if task.task_id not in by_task:
            continue
        trajs, vs = verify_with_repair(task, by_task[task.task_id], repair)
        verdicts += vs
        repaired += trajs[1:]
        if vs[-1].passed:
            kept.append((task, trajs[-1]))
    from tasks.datasets import sft_examples

    examples = sft_examples(kept, DIAGNOSTIC_FRACTION, ctx.seed)
    if repaired:  # beside the rollout's chunk, never over it
        ctx.store.write(repaired, f"{chunk}-repair")
    if verdicts:
        ctx.store.write(verdicts, chunk)
    if examples:
        ctx.store.write(examples, chunk)
    return verdicts, examples


def steering_for(arm: str, reflection, feedback) -> Steering:
    """The Designer's signal for the next round, by arm."""
    if arm in ("static", "single_agent", "no_designer", "no_feedback") or feedback is None:
        return ColdStart()
    if reflection is not None and reflection.steering == "new_factor":
        added = next(p.dimension_name for p in reflection.new_proposals if p.action != "no_change")
        cov = {s.value: s.count for s in feedback.coverage if s.factor == added}
        return NewFactor(factor=added, coverage=cov)
    return LearnerFeedback(feedback=feedback)
