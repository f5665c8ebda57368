"""The stages of synthesis as idempotent functions over the store: one pipeline for every caller.

The Prefect round (``flows/round.py``) maps them over chunks as tasks; ``evosyn
synth`` and the fixed test set run the same functions in-process through
``evosyn.tasks.synthesis.run_pass``, with the same chunking (``chunks``,
``chunk_name``), rejections and resume. Every stage writes its output as named
chunks of its tables, then marks the chunk complete (``Store.mark_complete``).
When the marker exists (a rerun, or a resume after a crash) the stage reads its
chunks back instead of recomputing: a finished stage is a no-op, an interrupted
one (some of its tables written, or none, or all but the marker) redoes its
chunk, rewriting the same files. Chunk names carry a hash of the stage's inputs.
"""
from __future__ import annotations

import hashlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import prefect

from evosyn.agents.designer import ColdStart, DesignError, EmbeddedDesigner, LearnerFeedback, NewFactor, Steering
from evosyn.agents.generator import GenerationError
from evosyn.agents.planner import PlanError
from evosyn.agents.roles import RoleInvalid, Roles, fallback_note
from evosyn.agents.synthesis import rejection_verdict, unplanned, verify_with_repair
from evosyn.tasks import timing
from evosyn.tasks.context import DIAGNOSTIC_FRACTION, Ctx  # noqa: F401 (re-exported: every caller imports them from here)
from evosyn.tasks.engine import STAGE_TASK, emitter
from evosyn.tasks.datasets import sft_examples
from evosyn.tasks.progress import Emit, StageEvent, rejections
from evosyn.storage.records import Arm, Blueprint, Direction, SFTExample, SynthesisSpace, SynthTask, Trajectory, Verdict

log = logging.getLogger("evosyn.stages")


def _h(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:10]


def emit_event(emit: Emit | None, ctx: Ctx, stage: str, done: int, kept: int, rejected: list[Verdict] = (),
               total: int | None = None, detail: str = "", since: float | None = None) -> None:
    """Tell ``emit`` (when given) what a call of ``stage`` did; ``rejected``: the verdicts of what it dropped;
    ``since``: the call's start (``time.monotonic()``)."""
    if emit is not None:
        emit(StageEvent(run_id=ctx.run_id, round=ctx.round, stage=stage, done=done, kept=kept,
                        rejected=rejections(rejected), total=total, detail=detail,
                        seconds=0.0 if since is None else time.monotonic() - since))


def chunks(items: list, size: int) -> list[list]:
    """The blueprints of a pass in chunks of ``size``, in order: the unit of generate, rollout and verify."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def _map(fn: Callable, items: list, roles: Roles, role: str) -> list:
    """``fn`` over items in order; LLM-backed roles run up to their ``max_concurrency`` calls at once.

    Items run one after the other for an embedded role (CPU-bound: threads would only take turns)."""
    client = roles.clients.get(role)
    workers = client.limits.slots.limit if client is not None else 1
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


def _attempt(fn: Callable, *args: Any, bug: str = "") -> tuple[Any, str]:
    """(result, "") or (None, reason): one failed item is a recorded rejection, never a crashed stage."""
    try:
        return fn(*args), ""
    except (GenerationError, PlanError, KeyError) as exc:
        return None, str(exc)
    except Exception as exc:  # a role bug or an exhausted LLM costs one item, not the round
        return None, f"{bug}{type(exc).__name__}: {exc}"


FALLBACK_RATIONALE = "embedded fallback"


def _designed(emit: Emit | None, ctx: Ctx, dirs: list[Direction], steering: Steering, t0: float) -> list[Direction]:
    n = sum(d.n_blueprints for d in dirs)
    detail = f"{len(dirs)} directions, {n} blueprints ({steering.kind.replace('_', ' ')})"
    if dirs and dirs[0].rationale.startswith(FALLBACK_RATIONALE):  # said again when a resume reads them back
        detail += "; " + fallback_note("designer", "the embedded designer's directions")
    emit_event(emit, ctx, "design", len(dirs), len(dirs), total=len(dirs), detail=detail, since=t0)
    return dirs


def design(ctx: Ctx, space: SynthesisSpace, steering: Steering, budget: int, arm: str,
           emit: Emit | None = None) -> list[Direction]:
    t0 = time.monotonic()
    chunk = f"design-{_h(space.version, steering.kind, budget, arm)}"
    if ctx.done("design", chunk):  # in the order they were designed, as the uninterrupted run has them
        return _designed(emit, ctx, ctx.read("directions", chunk), steering, t0)
    if arm == "single_agent":  # one role: a single unconstrained direction, uniform sampling
        steering = ColdStart()
        dirs = EmbeddedDesigner(ctx.pack.planner_rules).design(space, steering, budget, run_id=ctx.run_id,
                                                               round=ctx.round, seed=ctx.seed)
        dirs = [dirs[0].model_copy(update={"allowed_values": {}, "objective": "any task the space allows",
                                           "n_blueprints": budget, "rationale": "single agent: no designer"})]
    else:
        roles = ctx.roles()
        try:
            dirs = roles.designer.design(space, steering, budget, run_id=ctx.run_id, round=ctx.round, seed=ctx.seed)
        except DesignError as exc:
            if "designer" not in roles.clients:
                raise
            if not roles.falls_back("designer"):  # on_invalid: fail; a server that is down says so first
                ctx.flush(roles, chunk)
                raise RoleInvalid("designer", roles.clients["designer"].endpoint, str(exc)) from None
            # on_invalid: fallback: the embedded design, recorded on every direction and in llm_calls, and warned
            roles.clients["designer"].record_fallback(str(exc), "designer")
            dirs = EmbeddedDesigner(ctx.pack.planner_rules).design(space, steering, budget, run_id=ctx.run_id,
                                                                   round=ctx.round, seed=ctx.seed)
            dirs = [d.model_copy(update={"rationale": f"{FALLBACK_RATIONALE} ({exc}); {d.rationale}"})
                    for d in dirs]
        ctx.flush(roles, chunk)
    ctx.put("directions", dirs, chunk)
    ctx.crash_point("design")
    ctx.mark("design", chunk)
    return _designed(emit, ctx, dirs, steering, t0)


def plan(ctx: Ctx, space: SynthesisSpace, directions: list[Direction], emit: Emit | None = None, *,
         feasible: bool = False) -> list[Blueprint]:
    """``feasible``: the Planner asks the generator (its ``realizable``, where it has one: the embedded
    generator) whether each selection can be built, and draws again where not, so a round's budget goes to
    tasks the generator makes. The fixed test sets plan without it: their slots keep their own redraw rule."""
    t0 = time.monotonic()
    chunk = f"plan-{_h(*[d.direction_id for d in directions])}"
    if ctx.done("plan", chunk):
        out, rejected = ctx.read("blueprints", chunk), ctx.read("verdicts", chunk)
        n = len(out) + len(rejected)
        emit_event(emit, ctx, "plan", n, len(out), rejected, total=n, since=t0)
        return sorted(out, key=lambda b: b.blueprint_id)
    roles = ctx.roles()
    jobs = [(d, i) for d in directions for i in range(d.n_blueprints)]
    probe = getattr(roles.generator, "realizable", None) if feasible else None
    results = _map(lambda job: _attempt(lambda: roles.planner.plan(job[0], space, None, index=job[1],
                                                                   seed=ctx.seed + ctx.round, feasible=probe)),
                   jobs, roles, "planner")
    out, rejected = [], []
    for (d, i), (bp, reason) in zip(jobs, results):
        if bp is not None:
            out.append(bp)
        else:
            rejected.append(rejection_verdict(unplanned(d, i), "plan", reason))
    ctx.flush(roles, chunk)
    ctx.put("verdicts", rejected, chunk)
    ctx.put("blueprints", out, chunk)
    ctx.crash_point("plan")
    ctx.mark("plan", chunk)  # also when every plan was rejected: an empty plan is a finished one
    emit_event(emit, ctx, "plan", len(jobs), len(out), rejected, total=len(jobs), since=t0)
    return sorted(out, key=lambda b: b.blueprint_id)


def chunk_name(stage: str, blueprints: list[Blueprint]) -> str:
    return f"{stage}-{_h(*[b.blueprint_id for b in blueprints])}"


def generate(ctx: Ctx, space: SynthesisSpace, blueprints: list[Blueprint], emit: Emit | None = None
             ) -> list[SynthTask]:
    t0 = time.monotonic()
    chunk = chunk_name("gen", blueprints)
    if ctx.done("generate", chunk):
        tasks = ctx.read("tasks", chunk)
        emit_event(emit, ctx, "generate", len(blueprints), len(tasks), ctx.read("verdicts", chunk), since=t0)
        return tasks
    roles = ctx.roles()
    results = _map(lambda bp: _attempt(roles.generator.generate, bp, space, bug="generator error: "), blueprints,
                   roles, "generator")
    tasks, rejected = [], []
    for bp, (task, reason) in zip(blueprints, results):
        if task is not None:
            tasks.append(task if ctx.source is None else task.model_copy(update={"source": ctx.source}))
        else:
            rejected.append(rejection_verdict(bp, "generate", reason))
    ctx.flush(roles, chunk)
    ctx.put("verdicts", rejected, chunk)
    ctx.put("tasks", tasks, chunk)
    ctx.crash_point("generate")
    ctx.mark("generate", chunk)
    emit_event(emit, ctx, "generate", len(blueprints), len(tasks), rejected, since=t0)
    return tasks


def rollout(ctx: Ctx, tasks: list[SynthTask], chunk: str, emit: Emit | None = None) -> list[Trajectory]:
    t0 = time.monotonic()
    if ctx.done("rollout", chunk):
        out = ctx.read("trajectories", chunk)
        dropped = ctx.read("verdicts", f"{chunk}-rollout")
        emit_event(emit, ctx, "rollout", len(tasks), len(out), dropped, since=t0)
        return out
    roles = ctx.roles()
    results = _map(lambda t: _attempt(roles.teacher.rollout, t, bug="teacher error: "), tasks, roles, "teacher")
    out = [traj for traj, _ in results if traj is not None]
    failed = [(t, reason) for t, (traj, reason) in zip(tasks, results) if traj is None]
    ctx.flush(roles, chunk)
    # rollout rejections go beside the verifier's verdicts of this chunk, never over them
    dropped = [rejection_verdict(_lineage(t), "rollout", reason) for t, reason in failed]
    ctx.put("verdicts", dropped, f"{chunk}-rollout")
    ctx.put("trajectories", out, chunk)
    ctx.crash_point("rollout")
    ctx.mark("rollout", chunk)
    emit_event(emit, ctx, "rollout", len(tasks), len(out), dropped, since=t0)
    return out


def _lineage(task: SynthTask) -> Blueprint:
    """A stand-in blueprint carrying a task's lineage, for a rollout rejection."""
    return unplanned(Direction(run_id=task.run_id, round=task.round, space_version=task.space_version,
                               direction_id=task.direction_id or "", condition_id="", objective_type="exploration",
                               objective="", budget_level="zero")).model_copy(
        update={"blueprint_id": task.blueprint_id})


def _verified(emit: Emit | None, ctx: Ctx, verdicts: list[Verdict], t0: float) -> None:
    last: dict[str, Verdict] = {}
    for v in verdicts:  # a task's attempts in order: its last verdict decides
        if v.attempt >= last.get(v.task_id, v).attempt:
            last[v.task_id] = v
    kept = sum(v.passed for v in last.values())
    emit_event(emit, ctx, "verify", len(last), kept, [v for v in last.values() if not v.passed], since=t0)


def verify_chunk(ctx: Ctx, tasks: list[SynthTask], trajectories: list[Trajectory], chunk: str,
                 emit: Emit | None = None) -> tuple[list[Verdict], list[SFTExample]]:
    t0 = time.monotonic()
    if ctx.done("verify", chunk):  # also a chunk where nothing was kept: it wrote no examples, and is done
        verdicts = ctx.read("verdicts", chunk)
        _verified(emit, ctx, verdicts, t0)
        return verdicts, ctx.read("sft_examples", chunk)
    roles = ctx.roles()
    repair = roles.repair
    by_task = {t.task_id: t for t in trajectories}
    verdicts, repaired, kept = [], [], []
    for task in tasks:
        if task.task_id not in by_task:
            continue
        trajs, vs = verify_with_repair(task, by_task[task.task_id], repair, ctx.env)
        verdicts += vs
        repaired += trajs[1:]
        if vs[-1].passed:
            kept.append((task, trajs[-1]))
    examples = [] if ctx.diagnostic_fraction is None else sft_examples(kept, ctx.env, ctx.diagnostic_fraction, ctx.seed)
    ctx.flush(roles, f"{chunk}-verify")
    ctx.put("trajectories", repaired, f"{chunk}-repair")  # beside the rollout's chunk, never over it
    ctx.put("verdicts", verdicts, chunk)
    ctx.crash_point("verify")
    ctx.put("sft_examples", examples, chunk)
    ctx.mark("verify", chunk)
    _verified(emit, ctx, verdicts, t0)
    return verdicts, examples


def steering_for(arm: str, reflection, feedback) -> Steering:
    """The Designer's signal for the next round, by arm (the table in ``tasks/loop.py``).

    ``no_feedback`` differs from ``evosyn`` only in evidence (B.6): the factor its Reflector added is
    populated as evosyn's is, but without the coverage counts of the learner-facing feedback, and it is
    otherwise never steered by learner feedback.
    """
    if arm in ("static", "single_agent", "no_designer") or feedback is None:
        return ColdStart()
    added = (next((p.dimension_name for p in reflection.new_proposals if p.action != "no_change"), None)
             if reflection is not None and reflection.steering == "new_factor" else None)
    if arm == "no_feedback":
        return NewFactor(factor=added) if added else ColdStart()
    if added:
        cov = {s.value: s.count for s in feedback.coverage if s.factor == added}
        return NewFactor(factor=added, coverage=cov)
    return LearnerFeedback(feedback=feedback)


# --- the stages' Prefect tasks (flows/round.py composes them; generate, rollout and verify are mapped over chunks)

@prefect.task(name="design", **STAGE_TASK)
def design_task(ctx: Ctx, space: SynthesisSpace, steering: Steering, budget: int, arm: Arm) -> list[Direction]:
    with timing.span("fn", "design", ctx.round):
        return design(ctx, space, steering, budget, arm, emit=emitter())


@prefect.task(name="plan", **STAGE_TASK)
def plan_task(ctx: Ctx, space: SynthesisSpace, directions: list[Direction]) -> list[Blueprint]:
    with timing.span("fn", "plan", ctx.round):
        return plan(ctx, space, directions, emit=emitter(), feasible=True)


@prefect.task(name="generate", **STAGE_TASK)
def generate_task(ctx: Ctx, space: SynthesisSpace, chunk: list[Blueprint]) -> list[SynthTask]:
    with timing.span("fn", "generate", ctx.round):
        return generate(ctx, space, chunk, emit=emitter())


@prefect.task(name="rollout", **STAGE_TASK)
def rollout_task(ctx: Ctx, tasks_: list[SynthTask], name: str) -> list[Trajectory]:
    with timing.span("fn", "rollout", ctx.round):
        return rollout(ctx, tasks_, name, emit=emitter())


@prefect.task(name="verify", **STAGE_TASK)
def verify_task(ctx: Ctx, tasks_: list[SynthTask], trajectories: list[Trajectory], name: str
                ) -> tuple[list[Verdict], list[SFTExample]]:
    with timing.span("fn", "verify", ctx.round):
        return verify_chunk(ctx, tasks_, trajectories, name, emit=emitter())
