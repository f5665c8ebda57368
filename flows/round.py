"""One EvoSyn round as a Prefect flow: design -> plan -> generate -> rollout -> verify -> train -> evaluate -> reflect.

Tasks are thin wrappers over the stage functions of ``pipeline.stages`` / ``pipeline.loop``
(the ones ``evosyn synth`` and the test set run in-process); per-item work
(generate, rollout, verify) is mapped over chunks of blueprints with bounded
concurrency. Every stage is idempotent over the store, so a rerun after a
crash redoes only the chunks that are missing.
"""
from __future__ import annotations

from dataclasses import dataclass

from prefect import flow, task, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

import pipeline.loop as loop
import pipeline.stages as stages
from agents.designer import Steering
from agents.learners.embedded import EmbeddedLearner
from flows.train import train_via_deployment
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


@task(name="design")
def design_task(ctx: Ctx, space: SynthesisSpace, steering: Steering, budget: int, arm: Arm) -> list[Direction]:
    return stages.design(ctx, space, steering, budget, arm)


@task(name="plan")
def plan_task(ctx: Ctx, space: SynthesisSpace, directions: list[Direction]) -> list[Blueprint]:
    return stages.plan(ctx, space, directions)


@task(name="generate")
def generate_task(ctx: Ctx, space: SynthesisSpace, chunk: list[Blueprint]) -> list[SynthTask]:
    return stages.generate(ctx, space, chunk)


@task(name="rollout")
def rollout_task(ctx: Ctx, tasks_: list[SynthTask], name: str) -> list[Trajectory]:
    return stages.rollout(ctx, tasks_, name)


@task(name="verify")
def verify_task(ctx: Ctx, tasks_: list[SynthTask], trajectories: list[Trajectory], name: str
                ) -> tuple[list[Verdict], list[SFTExample]]:
    return stages.verify_chunk(ctx, tasks_, trajectories, name)


@task(name="train")
def train_task(ctx: Ctx) -> EmbeddedLearner:
    return loop.train(ctx)


@task(name="evaluate")
def evaluate_task(ctx: Ctx, learner: EmbeddedLearner, task_set: str, test_size: int) -> list[Evaluation]:
    return loop.evaluate(ctx, learner, task_set, test_size)


@task(name="reflect")
def reflect_task(ctx: Ctx, space: SynthesisSpace, arm: Arm, diagnostic: list[Evaluation], learner: EmbeddedLearner,
                 previous: Feedback | None):
    return loop.reflect(ctx, space, arm, diagnostic, learner, previous)


@flow(name="evosyn-round", task_runner=ThreadPoolTaskRunner(max_workers=2))
def round_flow(cfg: RunConfig, run_id: str, round: int, space: SynthesisSpace, steering: Steering,
               previous: Feedback | None = None) -> RoundResult:
    """Round ``round`` of run ``run_id`` under ``cfg`` (its LLM roles already checked by ``check_roles``)."""
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
    learner = train_via_deployment(ctx, cfg.train_deployment) if cfg.train_deployment else train_task(ctx)
    diagnostic = evaluate_task(ctx, learner, "diagnostic", cfg.test_size)
    test = evaluate_task(ctx, learner, "test", cfg.test_size)
    feedback, _, reflection, nxt = reflect_task(ctx, space, cfg.arm, diagnostic, learner, previous)
    return RoundResult(round=round, space_in=space, space_out=nxt, blueprints=len(blueprints),
                       verified=len({e.task_id for e in examples}), feedback=feedback, reflection=reflection,
                       diagnostic=diagnostic, test=test, directions=directions)
