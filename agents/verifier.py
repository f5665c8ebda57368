"""The Verifier role: replay a candidate trajectory and keep it only if every check holds."""
from __future__ import annotations

import hashlib

from evosyn.envs.base import Domain, EnvTask
from evosyn.envs.verify import run_checks
from evosyn.storage.records import SynthTask, Trajectory, Verdict


def verify(task: SynthTask | EnvTask, trajectory: Trajectory, env: Domain) -> Verdict:
    """``Verdict`` of a trajectory in ``env``, the task's environment: reward by the task's reward basis, plus our
    stricter checks."""
    if isinstance(task, SynthTask):
        if task.domain != env.name:  # a stored task replayed elsewhere would be judged by another domain's rules
            raise ValueError(f"verify: task {task.task_id} is of domain {task.domain!r}, not {env.name!r}")
        env_task, requested, stored = env.task_from_json(task.definition), task.requested, task.gold_digest
    else:
        env_task, requested, stored = task, {}, ""
    outcome = run_checks(env, env_task, trajectory.messages,
                         termination=trajectory.termination, requested=requested, gold_digest=stored)
    verdict_id = hashlib.sha256(f"{trajectory.trajectory_id}:{trajectory.attempt}".encode()).hexdigest()[:16]
    return Verdict(
        run_id=trajectory.run_id, round=trajectory.round, space_version=trajectory.space_version,
        direction_id=trajectory.direction_id, blueprint_id=trajectory.blueprint_id,
        verdict_id=verdict_id, task_id=trajectory.task_id, trajectory_id=trajectory.trajectory_id,
        reward=outcome.reward, passed=outcome.passed, checks=outcome.checks, observed=outcome.observed,
        attempt=trajectory.attempt)
