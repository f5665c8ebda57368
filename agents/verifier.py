"""The Verifier role: replay a candidate trajectory and keep it only if every check holds."""
from __future__ import annotations

import hashlib

from evosyn.envs.base import EnvTask
from evosyn.envs.packs import get_domain
from evosyn.envs.verify import run_checks
from evosyn.storage.records import SynthTask, Trajectory, Verdict


def verify(task: SynthTask | EnvTask, trajectory: Trajectory, domain: str | None = None) -> Verdict:
    """``Verdict`` of a trajectory: reward by the task's reward basis, plus our stricter checks."""
    name = domain or (task.domain if isinstance(task, SynthTask) else None)
    if name is None:
        raise ValueError("verify: pass domain= when the task is an environment's own task")
    requested = task.requested if isinstance(task, SynthTask) else {}
    stored = task.gold_digest if isinstance(task, SynthTask) else ""
    env = get_domain(name)
    env_task = env.task_from_json(task.definition) if isinstance(task, SynthTask) else task
    outcome = run_checks(env, env_task, trajectory.messages,
                         termination=trajectory.termination, requested=requested, gold_digest=stored)
    verdict_id = hashlib.sha256(f"{trajectory.trajectory_id}:{trajectory.attempt}".encode()).hexdigest()[:16]
    return Verdict(
        run_id=trajectory.run_id, round=trajectory.round, space_version=trajectory.space_version,
        direction_id=trajectory.direction_id, blueprint_id=trajectory.blueprint_id,
        verdict_id=verdict_id, task_id=trajectory.task_id, trajectory_id=trajectory.trajectory_id,
        reward=outcome.reward, passed=outcome.passed, checks=outcome.checks, observed=outcome.observed,
        attempt=trajectory.attempt)
