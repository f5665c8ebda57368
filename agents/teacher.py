"""Rollout teacher: solves a task in the environment the way the policy demands.

The embedded teacher identifies the user, looks up what justifies each change,
describes every state-changing call and waits for an explicit yes before it,
refuses with the reason when the policy forbids the request, and tells the user
what they asked to know. Every observation is the live environment's answer.
"""
from __future__ import annotations

import hashlib
from typing import Protocol

from agents.user import EmbeddedUser, UserSimulator
from envs.base import Domain
from envs.gold import confirmation_request
from envs.tau2.convert import task_from_dict
from storage.records import Message, SynthTask, ToolCall, Trajectory


class Teacher(Protocol):
    def rollout(self, task: SynthTask, attempt: int = 0, plain: bool = False) -> Trajectory: ...


def trajectory_id(task_id: str, attempt: int) -> str:
    return "tr-" + hashlib.sha256(f"{task_id}/{attempt}".encode()).hexdigest()[:12]


class EmbeddedTeacher:
    def __init__(self, domain: Domain):
        self.domain = domain

    def rollout(self, task: SynthTask, attempt: int = 0, plain: bool = False) -> Trajectory:
        """``plain`` drops the interaction challenges (a repair strategy)."""
        tau2_task = task_from_dict(task.tau2_task)
        scenario = dict(task.scenario)
        if plain:
            scenario["challenges"] = []
        user: UserSimulator = EmbeddedUser(scenario)
        episode = self.domain.episode(tau2_task.initial_state)
        msgs: list[Message] = [user.opening()]

        def say(text: str) -> None:
            msgs.append(Message(role="assistant", content=text))

        if isinstance(user, EmbeddedUser) and user.withholds_id():
            say("I can help with that. Could you please give me your user id first?")
            msgs.append(user.give_user_id())
        actions = tau2_task.evaluation_criteria.actions or []
        writes_done, intent = 0, 0
        for n, action in enumerate(actions):
            kind = self.domain.tool_kind(action.name)
            if kind == "write":
                say(confirmation_request(action.name, action.arguments))
                replies = user.confirm(first=writes_done == 0)
                msgs.extend(replies)
                if "again" in (replies[-1].content or ""):
                    say("Of course. " + confirmation_request(action.name, action.arguments))
                    msgs.append(Message(role="user", content="Thanks, that is clear. Yes, go ahead.", requestor="user"))
            call = ToolCall(id=f"call_{n}", name=action.name, arguments=dict(action.arguments))
            msgs.append(Message(role="assistant", tool_calls=[call]))
            obs = episode.step(call.name, call.arguments)
            msgs.append(Message(role="tool", content=obs.content, tool_call_id=call.id, error=obs.error))
            if kind == "write":
                writes_done += 1
                remaining_writes = any(self.domain.tool_kind(a.name) == "write" for a in actions[n + 1:])
                if isinstance(user, EmbeddedUser) and user.interleaved and remaining_writes:
                    intent += 1
                    say("That is done. Is there anything else I can help you with?")
                    msgs.append(user.next_intent(intent))
        refusal = scenario.get("refusal")
        if refusal:
            say(f"I'm sorry, but I cannot do that: {refusal['rule']}.")
            msgs.append(user.accept_refusal())
        # the agent cannot know whether the user has more to ask, so it always asks before closing
        say("Is there anything else I can help you with?")
        msgs.append(user.nothing_else())
        info = scenario.get("info") or []
        closing = "Everything you asked for is taken care of." if not refusal else "Thank you for understanding."
        if info and not refusal:  # a refusal already said what it cannot do
            closing += " For your records: " + "; ".join(info) + "."
        say(closing)
        msgs.append(user.goodbye())
        return Trajectory(run_id=task.run_id, round=task.round, space_version=task.space_version,
                          direction_id=task.direction_id, blueprint_id=task.blueprint_id,
                          trajectory_id=trajectory_id(task.task_id, attempt), task_id=task.task_id, messages=msgs,
                          producer="teacher" if attempt == 0 else "repair", attempt=attempt,
                          termination="user_stop")
