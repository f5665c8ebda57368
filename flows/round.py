"""One EvoSyn round as a Prefect flow: design -> plan -> generate -> rollout -> verify -> train -> evaluate -> reflect.

Tasks are thin wrappers over the stage functions of ``pipeline.stages`` / ``pipeline.loop``
(the ones ``evosyn synth`` and the test set run in-process); per-item work
(generate, rollout, verify) is mapped over chunks of blueprints with bounded
concurrency. Every stage is idempotent over the store, so a rerun after a
crash redoes only the chunks that are missing.

Each task logs what its stage did to its Prefect task run ("verify: 5/6 kept;
rejected: policy 1") and publishes the events to the process's listeners
(``flows.progress``: the CLI's live display); the round's flow run logs each
stage's total line and, at its end, publishes its artifacts (``flows.artifacts``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from prefect import flow, get_run_logger, task, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

import pipeline.loop as loop
import pipeline.stages as stages
from agents.designer import Steering
from agents.learners.embedded import EmbeddedLearner
from flows.artifacts import publish_round
from flows.progress import listening, publish
from flows.train import train_via_deployment
from pipeline.metrics import intrinsic, round_metrics, verified_samples
from pipeline.progress import Emit, StageEvent, Tally, event_line
from pipeline.stages import Ctx
from storage.config import RunConfig
from storage.records import (Arm, Blueprint, Direction, Evaluation, Feedback, Reflection, SFTExample, SynthesisSpace,
                             SynthTask, Trajectory, Verdict)


@dataclass
class RoundResult:
    round: int
    space_in: SynthesisSpace
    space_out: SynthesisSpace
    blueprints: int
    verified: int
    feedback: Feedback
    reflection: Reflection | None
    diagnostic: list[Evaluation]
    test: list[Evaluation]
    directions: list[Direction]
    metrics: dict[str, float] = field(default_factory=dict)


def _emitter() -> Emit:
    """Inside a task: each event logged to its task run, then published to this process's listeners."""
    logger = get_run_logger()

    def emit(ev: StageEvent) -> None:
        logger.info(event_line(ev))
        publish(ev)
    return emit


@task(name="design")
def design_task(ctx: Ctx, space: SynthesisSpace, steering: Steering, budget: int, arm: Arm) -> list[Direction]:
    return stages.design(ctx, space, steering, budget, arm, emit=_emitter())


@task(name="plan")
def plan_task(ctx: Ctx, space: SynthesisSpace, directions: list[Direction]) -> list[Blueprint]:
    return stages.plan(ctx, space, directions, emit=_emitter())


@task(name="generate")
def generate_task(ctx: Ctx, space: SynthesisSpace, chunk: list[Blueprint]) -> list[SynthTask]:
    return stages.generate(ctx, space, chunk, emit=_emitter())


@task(name="rollout")
def rollout_task(ctx: Ctx, tasks_: list[SynthTask], name: str) -> list[Trajectory]:
    return stages.rollout(ctx, tasks_, name, emit=_emitter())


@task(name="verify")
def verify_task(ctx: Ctx, tasks_: list[SynthTask], trajectories: list[Trajectory], name: str
                ) -> tuple[list[Verdict], list[SFTExample]]:
    return stages.verify_chunk(ctx, tasks_, trajectories, name, emit=_emitter())


@task(name="train")
def train_task(ctx: Ctx) -> EmbeddedLearner:
    return loop.train(ctx, emit=_emitter())


@task(name="evaluate")
def evaluate_task(ctx: Ctx, learner: EmbeddedLearner, task_set: str, test_size: int) -> list[Evaluation]:
    return loop.evaluate(ctx, learner, task_set, test_size, emit=_emitter())


@task(name="reflect")
def reflect_task(ctx: Ctx, space: SynthesisSpace, arm: Arm, diagnostic: list[Evaluation], learner: EmbeddedLearner,
                 previous: Feedback | None):
    return loop.reflect(ctx, space, arm, diagnostic, learner, previous, emit=_emitter())


def round_metrics_of(ctx: Ctx, res: RoundResult) -> dict[str, float]:
    """The round's metrics as MLflow and the round's table artifact have them (NaN left out)."""
    store, run_id = ctx.store, ctx.run_id
    samples = verified_samples(store, run_id, res.round)
    m = intrinsic(samples, ctx.domain)  # diversity vs this run's own patterns; `evosyn compare` shares a union
    m.update({k: v for k, v in round_metrics(store, run_id, ctx.domain, res.round).items() if not math.isnan(v)})
    rate = lambda evs: (sum(e.success for e in evs) / len(evs)) if evs else 0.0  # noqa: E731
    m.update({"verified_yield": res.verified / max(1, res.blueprints), "verified_total": float(len(samples)),
              "success_diagnostic": rate(res.diagnostic), "success_test": rate(res.test),
              "space_version": float(res.space_out.version)})
    for s in res.feedback.performance:
        if s.factor in ("num_write", "task_family", "expected_outcome") and s.success_rate is not None:
            m[f"success_diag.{s.factor}.{s.value}"] = s.success_rate
    by_bucket: dict[str, list[int]] = {}
    for e in res.test:
        for v in e.observed.get("num_write", []):
            by_bucket.setdefault(v, []).append(int(e.success))
    for v, xs in by_bucket.items():
        m[f"success_test.num_write.{v}"] = sum(xs) / len(xs)
    return m


@flow(name="evosyn-round", task_runner=ThreadPoolTaskRunner(max_workers=2))
def round_flow(cfg: RunConfig, run_id: str, round: int, space: SynthesisSpace, steering: Steering,
               previous: Feedback | None = None) -> RoundResult:
    """Round ``round`` of run ``run_id`` under ``cfg`` (its LLM roles already checked by ``check_roles``)."""
    logger, tally = get_run_logger(), Tally()

    def stage_done(ev: StageEvent) -> None:  # from the task threads: each stage's total line, once
        if ev.round == round:
            for st in tally.add(ev):
                logger.info(st.line())

    with listening(run_id, stage_done):
        res = _round(cfg, run_id, round, space, steering, previous)
    publish_round(run_id, res, [st for st in tally.snapshot() if st.round == round])
    return res


def _round(cfg: RunConfig, run_id: str, round: int, space: SynthesisSpace, steering: Steering,
           previous: Feedback | None) -> RoundResult:
    ctx = Ctx.for_run(cfg, run_id, round)
    directions = design_task(ctx, space, steering, cfg.budget, cfg.arm)
    blueprints = plan_task(ctx, space, directions)
    parts = stages.chunks(blueprints, cfg.chunk_size)
    generated = generate_task.map(unmapped(ctx), unmapped(space), parts)
    names = [stages.chunk_name("chunk", part) for part in parts]
    rolled = rollout_task.map(unmapped(ctx), generated, names)
    verified = verify_task.map(unmapped(ctx), generated, rolled, names)
    examples = [e for f in verified for e in f.result()[1]]
    # SFT on a (GPU) work pool through its deployment when configured, otherwise in this process
    if cfg.train_deployment:
        t0 = time.monotonic()
        learner = train_via_deployment(ctx, cfg.train_deployment)
        loop.trained(publish, ctx, learner, f" on deployment {cfg.train_deployment}", t0)
    else:
        learner = train_task(ctx)
    diagnostic = evaluate_task(ctx, learner, "diagnostic", cfg.test_size)
    test = evaluate_task(ctx, learner, "test", cfg.test_size)
    feedback, _, reflection, nxt = reflect_task(ctx, space, cfg.arm, diagnostic, learner, previous)
    res = RoundResult(round=round, space_in=space, space_out=nxt, blueprints=len(blueprints),
                      verified=len({e.task_id for e in examples}), feedback=feedback, reflection=reflection,
                      diagnostic=diagnostic, test=test, directions=directions)
    res.metrics = round_metrics_of(ctx, res)
    return res
