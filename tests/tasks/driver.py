"""The stages of `evosyn run`, in round_flow's order, without Prefect or MLflow: a fast run for resume tests.

``python -m tests.tasks.driver ROOT`` runs (or resumes) the tiny run below in
store ROOT; with ``EVOSYN_FAULT_KILL_AT`` set it dies there, as `evosyn run`
would.
"""
from __future__ import annotations

import sys

import evosyn.tasks.dedup as dedup
import evosyn.tasks.loop as loop
import evosyn.tasks.stages as stages
import evosyn.tasks.testset as testset
from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.storage.store import Store
from evosyn.envs.packs import get_domain, get_pack

RUN_ID = "tiny-run"
TINY = dict(rounds=2, budget=16, chunk_size=6, test_size=10, seed=0, arm="evosyn")


def run(store: Store, run_id: str = RUN_ID, rounds: int = 2, budget: int = 16, chunk_size: int = 6,
        test_size: int = 10, seed: int = 0, arm: str = "evosyn") -> None:
    space = load_initial_space(get_pack("airline"), run_id=run_id)
    if not store.has_chunk("spaces", run_id, 0, "initial"):
        store.write([space], "initial")
    for kind in testset.KINDS:  # built before round 1, as `evosyn run` builds them
        testset.test_cases(store, get_domain("airline"), n=test_size, kind=kind)
    steering, previous = ColdStart(), None
    for r in range(1, rounds + 1):
        ctx = stages.Ctx(store, run_id, r, seed, get_domain("airline"))
        directions = stages.design(ctx, space, steering, budget, arm)
        blueprints = stages.plan(ctx, space, directions)
        for part in stages.chunks(blueprints, chunk_size):
            tasks_ = stages.generate(ctx, space, part)
            name = stages.chunk_name("chunk", part)
            stages.verify_chunk(ctx, tasks_, stages.rollout(ctx, tasks_, name), name)
        dedup.dedup(ctx, test_size)
        learner = loop.train(ctx)
        diagnostic = loop.evaluate(ctx, learner, "diagnostic", test_size)
        loop.evaluate(ctx, learner, "test", test_size)
        loop.evaluate(ctx, learner, "test_uniform", test_size)
        feedback, _, reflection, space = loop.reflect(ctx, space, arm, diagnostic, learner, previous)
        steering, previous = stages.steering_for(arm, reflection, feedback), feedback


if __name__ == "__main__":
    run(Store(sys.argv[1]))
