"""One blueprint through generate -> rollout -> verify (-> repair), as a pure function."""
from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field

from agents.generator import GenerationError, Generator
from agents.repair import Repair
from agents.teacher import Teacher
from agents.verifier import verify
from storage.records import Blueprint, CheckResult, Direction, SynthesisSpace, SynthTask, Trajectory, Verdict


@dataclass
class Candidate:
    blueprint: Blueprint
    task: SynthTask | None = None
    trajectories: list[Trajectory] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    rejection: str = ""
    seconds: Counter = field(default_factory=Counter)  # per stage

    @property
    def kept(self) -> bool:
        return bool(self.verdicts) and self.verdicts[-1].passed

    @property
    def final(self) -> Trajectory | None:
        return self.trajectories[-1] if self.trajectories else None


def unplanned(d: Direction, index: int = 0) -> Blueprint:
    """A placeholder blueprint for a planning rejection, so the rejection keeps its lineage."""
    from storage.records import DifficultyControls

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


def verify_with_repair(task: SynthTask, trajectory: Trajectory, repair: Repair | None
                       ) -> tuple[list[Trajectory], list[Verdict]]:
    """Verify; on failure let Repair try (bounded by the strategy), each attempt verified from scratch."""
    trajectories, verdicts = [], []
    while True:
        verdict = verify(task, trajectory)
        trajectories.append(trajectory)
        verdicts.append(verdict)
        if verdict.passed or repair is None:
            return trajectories, verdicts
        fixed = repair.repair(task, trajectory, verdict)
        if fixed is None:
            return trajectories, verdicts
        trajectory, verdict.repair_reason = fixed


def synthesize(blueprint: Blueprint, space: SynthesisSpace, generator: Generator, teacher: Teacher,
               repair: Repair | None) -> Candidate:
    cand = Candidate(blueprint)
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        cand.seconds[stage] += now - clock
        clock = now

    try:
        cand.task = generator.generate(blueprint, space)
        lap("generate")
    except GenerationError as exc:
        cand.rejection = str(exc)
        cand.verdicts.append(rejection_verdict(blueprint, "generate", str(exc)))
        return cand
    except Exception as exc:  # a generator bug must cost one blueprint, never the round
        cand.rejection = f"generator error: {type(exc).__name__}: {exc}"
        cand.verdicts.append(rejection_verdict(blueprint, "generate", cand.rejection))
        return cand
    trajectory = teacher.rollout(cand.task)
    lap("rollout")
    cand.trajectories, cand.verdicts = verify_with_repair(cand.task, trajectory, repair)
    lap("verify+repair")
    if not cand.kept:
        cand.rejection = "; ".join(f"{c.name}: {c.reason}" for c in cand.verdicts[-1].failed())
    return cand
