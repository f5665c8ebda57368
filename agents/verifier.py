"""The Verifier role: replay a candidate trajectory and keep it only if every check holds."""
from __future__ import annotations

import hashlib
from typing import Any

from envs.packs import get_domain
from envs.tau2.convert import task_from_dict
from envs.verify import run_checks
from storage.records import SynthTask, Trajectory, Verdict


def _tau2_task(task: SynthTask | Any) -> Any:
    return task_from_dict(task.tau2_task) if isinstance(task, SynthTask) else task


def verify(task: SynthTask | Any, trajectory: Trajectory, domain: str | None = None) -> Verdict:
    """``Verdict`` of a trajectory: reward by the task's reward basis, plus our stricter checks."""
    name = domain or (task.domain if isinstance(task, SynthTask) else None)
    if name is None:
        raise ValueError("verify: pass domain= when the task is a bare tau2 Task")
    requested = task.requested if isinstance(task, SynthTask) else {}
    stored = task.gold_digest if isinstance(task, SynthTask) else ""
    outcome = run_checks(get_domain(name), _tau2_task(task), trajectory.messages,
                         termination=trajectory.termination, requested=requested, gold_digest=stored)
    verdict_id = hashlib.sha256(f"{trajectory.trajectory_id}:{trajectory.attempt}".encode()).hexdigest()[:16]
    return Verdict(
        run_id=trajectory.run_id, round=trajectory.round, space_version=trajectory.space_version,
        direction_id=trajectory.direction_id, blueprint_id=trajectory.blueprint_id,
        verdict_id=verdict_id, task_id=trajectory.task_id, trajectory_id=trajectory.trajectory_id,
        reward=outcome.reward, passed=outcome.passed, checks=outcome.checks, observed=outcome.observed,
        attempt=trajectory.attempt)
