"""Repair: one strategy per failure class, at most two attempts, each verified from the original state.

- communicate: the closing message gains the missing information;
- policy (confirmation only): an explicit confirmation exchange is inserted before the write;
- replay / executable: invalid calls are dropped and every observation is re-executed;
- state / actions: the task is rolled out again without its interaction challenges.
Factor mismatches and substantive policy violations are not repairable: the
candidate is rejected with the verifier's reason.
"""
from __future__ import annotations

from typing import Protocol

from agents.teacher import EmbeddedTeacher, trajectory_id
from envs.base import Domain
from envs.gold import confirmation_request
from envs.perturb import rematerialize
from envs.tau2.convert import task_from_dict
from storage.records import Message, SynthTask, Trajectory, Verdict

MAX_ATTEMPTS = 2


class Repair(Protocol):
    def repair(self, task: SynthTask, trajectory: Trajectory, verdict: Verdict) -> tuple[Trajectory, str] | None: ...


class EmbeddedRepair:
    def __init__(self, domain: Domain, teacher: EmbeddedTeacher):
        self.domain = domain
        self.teacher = teacher

    def repair(self, task: SynthTask, trajectory: Trajectory, verdict: Verdict) -> tuple[Trajectory, str] | None:
        failed = {c.name: c.reason for c in verdict.failed()}
        attempt = trajectory.attempt + 1
        if not failed or attempt > MAX_ATTEMPTS or "factors" in failed:
            return None
        if "policy" in failed and "[confirmation]" not in failed["policy"]:
            return None
        msgs = [m.model_copy(deep=True) for m in trajectory.messages]
        if set(failed) <= {"communicate"}:
            info = task_from_dict(task.tau2_task).evaluation_criteria.communicate_info or []
            closing = next(m for m in reversed(msgs) if m.role == "assistant" and m.content)
            closing.content = f"{closing.content} For your records: {'; '.join(info)}."
            return self._new(trajectory, msgs, attempt), "communicate: added the missing information"
        if set(failed) <= {"policy"}:
            return self._new(trajectory, self._confirm_writes(msgs), attempt), "policy: inserted confirmations"
        if set(failed) <= {"replay", "executable", "state", "actions"} and attempt == 1 and \
                set(failed) <= {"replay", "executable"}:
            kept = [m for m in msgs if not any(self.domain.validate_arguments(c.name, c.arguments, c.requestor)
                                               for c in m.tool_calls)]
            ids = {c.id for m in kept for c in m.tool_calls}
            kept = [m for m in kept if m.role != "tool" or m.tool_call_id in ids]
            tau2_task = task_from_dict(task.tau2_task)
            return (self._new(trajectory, rematerialize(self.domain, tau2_task, kept), attempt),
                    "replay: dropped invalid calls and re-executed every observation")
        plain = self.teacher.rollout(task, attempt=attempt, plain=True)
        return plain, f"{', '.join(sorted(failed))}: rolled out again without interaction challenges"

    def _confirm_writes(self, msgs: list[Message]) -> list[Message]:
        out: list[Message] = []
        for m in msgs:
            call = m.tool_calls[0] if m.tool_calls else None
            if call and self.domain.tool_kind(call.name, call.requestor) == "write":
                out.append(Message(role="assistant", content=confirmation_request(call.name, call.arguments)))
                out.append(Message(role="user", content="Yes, please go ahead.", requestor="user"))
            out.append(m)
        return out

    @staticmethod
    def _new(old: Trajectory, msgs: list[Message], attempt: int) -> Trajectory:
        return old.model_copy(update={"messages": msgs, "attempt": attempt, "producer": "repair",
                                      "trajectory_id": trajectory_id(old.task_id, attempt)})
