"""The per-item pieces the synthesis stages share (tasks/stages.py): verify with repair, rejection verdicts."""
from __future__ import annotations

import hashlib

from evosyn.agents.repair import Repair
from evosyn.agents.verifier import verify
from evosyn.envs.base import Domain
from evosyn.storage.records import (
    Blueprint,
    CheckResult,
    Direction,
    SynthTask,
    Trajectory,
    Verdict,
)


def unplanned(d: Direction, index: int = 0) -> Blueprint:
    """A placeholder blueprint for a planning rejection, so the rejection keeps its lineage."""
    from evosyn.storage.records import DifficultyControls

    return Blueprint(run_id=d.run_id, round=d.round, space_version=d.space_version, direction_id=d.direction_id,
                     blueprint_id=f"unplanned-{d.direction_id}-{index}", plan_id="", domain="", selected_dimensions={},
                     generation_intent="", expected_difficulty_controls=DifficultyControls(
                         expected_tool_calls="", num_policy_constraints="", num_entities="",
                         requires_clarification=False, allows_user_false_claim=False, requires_state_change=False))


def rejection_verdict(bp: Blueprint, stage: str, reason: str) -> Verdict:
    vid = hashlib.sha256(f"{bp.blueprint_id}/{stage}".encode()).hexdigest()[:16]
    return Verdict(run_id=bp.run_id, round=bp.round, space_version=bp.space_version, direction_id=bp.direction_id,
                   blueprint_id=bp.blueprint_id, verdict_id=vid, task_id="", trajectory_id="", reward=0.0,
                   passed=False, checks=[CheckResult(name=stage, passed=False, reason=reason)])


def verify_with_repair(task: SynthTask, trajectory: Trajectory, repair: Repair | None, env: Domain
                       ) -> tuple[list[Trajectory], list[Verdict]]:
    """Verify in ``env`` (the task's environment); on failure let Repair try (bounded by the strategy), each
    attempt verified from scratch."""
    trajectories, verdicts = [], []
    while True:
        verdict = verify(task, trajectory, env)
        trajectories.append(trajectory)
        verdicts.append(verdict)
        if verdict.passed or repair is None:
            return trajectories, verdicts
        fixed = repair.repair(task, trajectory, verdict)
        if fixed is None:
            return trajectories, verdicts
        trajectory, verdict.repair_reason = fixed
