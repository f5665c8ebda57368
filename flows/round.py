"""One EvoSyn round as a Prefect flow: design -> plan -> generate -> rollout -> verify -> train -> evaluate -> reflect.

Tasks are thin wrappers over ``pipeline.stages`` / ``pipeline.loop``; per-item work
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
from flows.train import train_via_deployment
from storage.records import Blueprint, Evaluation, Feedback, Reflection, SynthesisSpace
from storage.store import Store


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
    directions: list


@task(name="design")
def design_task(ctx: stages.Ctx, space, steering, budget: int, arm: str):
    return stages.design(ctx, space, steering, budget, arm)


@task(name="plan")
def plan_task(ctx: stages.Ctx, space, directions):
    return stages.plan(ctx, space, directions)


@task(name="generate")
def generate_task(ctx: stages.Ctx, space, chunk: list[Blueprint]):
    return stages.generate(ctx, space, chunk)


@task(name="rollout")
def rollout_task(ctx: stages.Ctx, tasks_, name: str):
    return stages.rollout(ctx, tasks_, name)


@task(name="verify")
def verify_task(ctx: stages.Ctx, tasks_, trajectories, name: str):
    return stages.verify_chunk(ctx, tasks_, trajectories, name)


@task(name="train")
def train_task(ctx: stages.Ctx):
    return loop.train(ctx)


@task(name="evaluate")
def evaluate_task(ctx: stages.Ctx, learner, task_set: str, test_size: int):
    return loop.evaluate(ctx, learner, task_set, test_size)


@task(name="reflect")
def reflect_task(ctx: stages.Ctx, space, arm: str, diagnostic, learner, previous):
    return loop.reflect(ctx, space, arm, diagnostic, learner, previous)


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


@flow(name="evosyn-round", task_runner=ThreadPoolTaskRunner(max_workers=2))
def round_flow(root: str, run_id: str, round: int, seed: int, arm: str, budget: int, space: SynthesisSpace,
               steering, previous: Feedback | None = None, chunk_size: int = 50, test_size: int = 200,
               domain: str = "airline", llm: dict | None = None,
               train_deployment: str | None = None) -> RoundResult:
    ctx = stages.Ctx(Store(root), run_id, round, seed, domain, llm=llm or {})
    directions = design_task(ctx, space, steering, budget, arm)
    blueprints = plan_task(ctx, space, directions)
    parts = chunks(blueprints, chunk_size)
    generated = generate_task.map(unmapped(ctx), unmapped(space), parts)
    names = [stages.chunk_name("chunk", part) for part in parts]
    rolled = rollout_task.map(unmapped(ctx), generated, names)
    verified = verify_task.map(unmapped(ctx), generated, rolled, names)
    examples = [e for f in verified for e in f.result()[1]]
    # SFT on a (GPU) work pool through its deployment when configured, otherwise in this process
    learner = train_via_deployment(ctx, train_deployment) if train_deployment else train_task(ctx)
    diagnostic = evaluate_task(ctx, learner, "diagnostic", test_size)
    test = evaluate_task(ctx, learner, "test", test_size)
    feedback, _, reflection, nxt = reflect_task(ctx, space, arm, diagnostic, learner, previous)
    return RoundResult(round=round, space_in=space, space_out=nxt, blueprints=len(blueprints),
                       verified=len({e.task_id for e in examples}), feedback=feedback, reflection=reflection,
                       diagnostic=diagnostic, test=test, directions=directions)
