"""Repair: one strategy per failure class, at most two attempts, each verified from the original state.

- communicate: the closing message gains the missing information;
- policy (confirmation only): an explicit confirmation exchange is inserted before the write;
- replay / executable: invalid calls are dropped and every observation is re-executed;
- state / actions: the task is rolled out again without its interaction challenges.
Factor mismatches and substantive policy violations are not repairable: the
candidate is rejected with the verifier's reason.
"""
from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from evosyn.agents.generator_schema import ActionOut
from evosyn.agents.teacher import EmbeddedTeacher, trajectory_id
from evosyn.envs.base import Domain, UserScenario
from evosyn.envs.gold import confirmation_request
from evosyn.envs.perturb import rematerialize
from evosyn.storage.records import Message, SynthTask, ToolCall, Trajectory, Verdict

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
            info = self.domain.task_from_json(task.definition).communicate_info
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
            env_task = self.domain.task_from_json(task.definition)
            return (self._new(trajectory, rematerialize(self.domain, env_task, kept), attempt),
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


# ------------------------------------------------------------------ LLM-backed Repair
class RepairMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = ""
    tool_calls: list[ActionOut] = Field(default_factory=list)


class RepairOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["revise", "rerun", "give_up"]
    reason: str = ""
    messages: list[RepairMessage] = Field(default_factory=list)


def conversation_view(msgs: list[Message]) -> list[str]:
    out = []
    for n, m in enumerate(msgs):
        if m.tool_calls:
            out.append(f"{n} assistant calls " + "; ".join(f"{c.name}({c.arguments})" for c in m.tool_calls))
        elif m.role == "tool":
            out.append(f"{n} tool result{' (error)' if m.error else ''}: {(m.content or '')[:160]}")
        else:
            out.append(f"{n} {m.role}: {m.content}")
    return out


def scenario_view(scenario: UserScenario) -> dict:
    """The user's side of a task as the repair prompt shows it."""
    keys = ("domain", "reason_for_call", "known_info", "unknown_info", "task_instructions")
    return {"instructions": {k: getattr(scenario, k) for k in keys},
            **({"persona": scenario.persona} if scenario.persona else {})}


def repair_messages(task: SynthTask, trajectory: Trajectory, verdict: Verdict, env: dict,
                    domain: Domain) -> list[dict]:
    from evosyn.agents.ask import render

    env_task = domain.task_from_json(task.definition)
    view = {"user_scenario": scenario_view(env_task.scenario),
            "gold_actions": [{"name": a.name, "arguments": a.arguments} for a in env_task.gold_actions],
            "communicate_info": env_task.communicate_info}
    text = render("repair.md", domain=task.domain, tools=env.get("tools", []), task=view,
                  failed=[f"{c.name}: {c.reason}" for c in verdict.failed()],
                  conversation=conversation_view(trajectory.messages))
    return [{"role": "user", "content": text}]


def parse_repair(out: RepairOut, trajectory: Trajectory, domain: Domain) -> RepairOut:
    """A revision may fix the agent's turns but never invent what the user asked for."""
    from evosyn.agents.ask import Invalid

    if out.action != "revise":
        return out
    if not out.messages or out.messages[0].role != "user":
        raise Invalid("a revision must be the whole conversation, starting with the user's first message")
    said = {(m.content or "").strip() for m in trajectory.messages if m.role == "user"}
    for n, m in enumerate(out.messages):
        if m.role == "user":
            if m.tool_calls:
                raise Invalid(f"message {n}: only assistant messages may call tools")
            text = m.content.strip()
            if text not in said and not (text.lower().startswith("yes") and len(text.split()) <= 12):
                raise Invalid(f"message {n}: user messages must be kept as they were (or be an inserted short "
                              f"'yes' confirmation); {text[:80]!r} is new")
        for c in m.tool_calls:
            problem = domain.validate_arguments(c.name, c.arguments)
            if problem:
                raise Invalid(f"message {n}: {problem}")
        if m.role == "assistant" and not m.content.strip() and not m.tool_calls:
            raise Invalid(f"message {n}: an assistant message needs text or a tool call")
    return out


class LLMRepair:
    """Repair by an LLM: revise the conversation (observations re-executed), roll out again, or give up."""

    def __init__(self, domain: Domain, teacher, client, env: dict, retries: int = 2):
        self.domain, self.teacher, self.client, self.env, self.retries = domain, teacher, client, env, retries
        self.raw: dict[str, str] = {}  # trajectory id -> raw reply

    def repair(self, task: SynthTask, trajectory: Trajectory, verdict: Verdict) -> tuple[Trajectory, str] | None:
        from evosyn.agents.ask import RoleRejected, ask

        failed = {c.name for c in verdict.failed()}
        attempt = trajectory.attempt + 1
        if not failed or attempt > MAX_ATTEMPTS or "factors" in failed:
            return None  # a factor mismatch is a wrong task, not a wrong conversation
        try:
            ans = ask(self.client, repair_messages(task, trajectory, verdict, self.env, self.domain), schema=RepairOut,
                      role="repair", retries=self.retries, validate=lambda o: parse_repair(o, trajectory, self.domain))
        except RoleRejected as exc:
            verdict.repair_reason = f"repair rejected: {exc}"
            return None
        out = ans.value
        self.raw[trajectory_id(task.task_id, attempt)] = ans.raw
        if out.action == "give_up":
            verdict.repair_reason = f"repair gave up: {out.reason}"
            return None
        if out.action == "rerun":
            try:
                return self.teacher.rollout(task, attempt=attempt, plain=True), f"rerun: {out.reason}"
            except (RoleRejected, ValueError) as exc:
                verdict.repair_reason = f"repair rerun failed: {exc}"
                return None
        msgs: list[Message] = []
        for n, m in enumerate(out.messages):
            calls = [ToolCall(id=f"rep{attempt}_{n}_{i}", name=c.name, arguments=c.arguments)
                     for i, c in enumerate(m.tool_calls)]
            msgs.append(Message(role=m.role, content=m.content or None, tool_calls=calls,
                                requestor="user" if m.role == "user" else "assistant"))
            msgs += [Message(role="tool", content="", tool_call_id=c.id) for c in calls]
        env_task = self.domain.task_from_json(task.definition)
        return (self._new(trajectory, rematerialize(self.domain, env_task, msgs), attempt),
                f"revise: {out.reason}")

    _new = staticmethod(EmbeddedRepair._new)
