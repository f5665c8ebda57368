"""Rollout teacher: solves a task in the environment the way the policy demands.

The embedded teacher identifies the user, looks up what justifies each change,
describes every state-changing call and waits for an explicit yes before it,
refuses with the reason when the policy forbids the request, and tells the user
what they asked to know. Every observation is the live environment's answer.
"""
from __future__ import annotations

import hashlib
import json
from typing import Protocol

from evosyn.agents.learners.exports import chat_message
from evosyn.agents.user import EmbeddedUser, UserSimulator, device_turn
from evosyn.envs.base import Domain
from evosyn.envs.gold import confirmation_request, device_request
from evosyn.storage.records import Message, SynthTask, ToolCall, Trajectory


class Teacher(Protocol):
    def rollout(self, task: SynthTask, attempt: int = 0, plain: bool = False) -> Trajectory: ...


def trajectory_id(task_id: str, attempt: int) -> str:
    return "tr-" + hashlib.sha256(f"{task_id}/{attempt}".encode()).hexdigest()[:12]


def _names(intent: dict, action) -> bool:
    """Whether a gold action is the last write of a user intent: its ``ends_with`` call when it has one (a
    request served by several writes), else the call it names (its tool, and its arguments when given)."""
    last = intent.get("ends_with") or intent
    return last.get("tool") == action.name and (not last.get("arguments")
                                                or last["arguments"] == dict(action.arguments))


class EmbeddedTeacher:
    def __init__(self, domain: Domain):
        self.domain = domain

    def rollout(self, task: SynthTask, attempt: int = 0, plain: bool = False) -> Trajectory:
        """``plain`` drops the interaction challenges (a repair strategy)."""
        env_task = self.domain.task_from_json(task.definition)
        scenario = dict(task.scenario)
        if plain:
            scenario["challenges"] = []
        user: UserSimulator = EmbeddedUser(scenario, self.domain.pack.phrasing)
        episode = self.domain.episode(env_task.initial_state)
        msgs: list[Message] = [user.opening()]

        def say(text: str) -> None:
            msgs.append(Message(role="assistant", content=text))

        if isinstance(user, EmbeddedUser) and user.withholds_id():
            say(self.domain.pack.phrasing.ask_identity)
            msgs.append(user.give_user_id())
        if scenario.get("clarify"):  # the request leaves a value out: the agent asks for it before acting
            say(scenario["clarify"]["ask"])
            msgs.append(user.clarify())
        actions = env_task.gold_actions
        intents = scenario.get("intents") or []
        writes_done, intent = 0, 0
        for n, action in enumerate(actions):
            kind = self.domain.tool_kind(action.name, action.requestor)
            call = ToolCall(id=f"call_{n}", name=action.name, arguments=dict(action.arguments),
                            requestor=action.requestor)
            if action.requestor == "user":  # a device action: the agent asks, the user performs it
                say(device_request(action.name, action.arguments))
                msgs.append(user.device_action(call))
            else:
                if kind == "write":
                    say(confirmation_request(action.name, action.arguments))
                    replies = user.confirm(first=writes_done == 0)
                    msgs.extend(replies)
                    if "again" in (replies[-1].content or ""):
                        say("Of course. " + confirmation_request(action.name, action.arguments))
                        msgs.append(Message(role="user", content="Thanks, that is clear. Yes, go ahead.",
                                            requestor="user"))
                    writes_done += 1
                msgs.append(Message(role="assistant", tool_calls=[call]))
            obs = episode.step(call.name, call.arguments, call.requestor)
            msgs.append(Message(role="tool", content=obs.content, tool_call_id=call.id, error=obs.error,
                                requestor=call.requestor))
            # under interleaving the user brings up the next request once the write its current one names is done
            if (kind == "write" and isinstance(user, EmbeddedUser) and user.interleaved
                    and intent + 1 < len(intents) and _names(intents[intent], action)):
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


# ------------------------------------------------------------------ LLM rollout teacher
def to_chat(msgs: list[Message]) -> list[dict]:
    """Trajectory messages as OpenAI-style chat messages (the agent's view: the user's device actions and their
    results are what the user says)."""
    return [chat_message(_as_agent_sees(m)) for m in msgs]


def _as_agent_sees(m: Message) -> Message:
    if m.requestor == "user" and m.tool_calls:  # a device action the user performed
        done = "; ".join(f"{c.name} {json.dumps(c.arguments)}" if c.arguments else c.name for c in m.tool_calls)
        said = f"{m.content} " if m.content else ""  # an LLM user may speak beside its device actions
        return Message(role="user", content=f"{said}(on my device: {done})")
    if m.role == "tool" and m.requestor == "user":
        return Message(role="user", content=f"My device shows: {m.content or ''}")
    return m


def teacher_messages(policy: str, domain: str, msgs: list[Message]) -> list[dict]:
    from evosyn.agents.ask import render

    return [{"role": "system", "content": render("teacher.md", domain=domain, policy=policy)}, *to_chat(msgs)]


def tool_turn(res, episode, step: int) -> list[Message]:
    """The messages of a reply's tool calls, each executed on ``episode`` (its errors come back as observations).

    A model that still sends several calls gets one turn per call.
    """
    calls = [ToolCall(id=c.id or f"call_{step}_{i}", name=c.name, arguments=dict(c.arguments or {}))
             for i, c in enumerate(res.tool_calls)]
    out = []
    for i, c in enumerate(calls):
        out.append(Message(role="assistant", content=(res.text or None) if i == 0 else None, tool_calls=[c]))
        obs = episode.step(c.name, c.arguments)
        out.append(Message(role="tool", content=obs.content, tool_call_id=c.id, error=obs.error))
    return out


class LLMTeacher:
    """An LLM agent with tool calling, acting in the live environment against a user simulator.

    The user is an ``LLMUser`` when a user client is given, else the embedded
    ``ReactiveUser`` playing the task's structured scenario. Every tool call is
    executed on a fresh episode of the task's initial state; the conversation
    ends when the user stops, or after ``max_steps`` model calls (termination
    ``max_steps``, which the verifier rejects).
    """

    def __init__(self, domain: Domain, client, user_client=None, max_steps: int = 40, retries: int = 2):
        self.domain, self.client, self.user_client = domain, client, user_client
        self.max_steps, self.retries = max_steps, retries
        self.tools = [s.openai_schema() for s in domain.tools("assistant")]

    def _user(self, task: SynthTask, plain: bool):
        from evosyn.agents.user import LLMUser, ReactiveUser, user_scenario_text

        if self.user_client is not None:  # with the user's device tools in a dual-control domain
            scenario = self.domain.task_from_json(task.definition).scenario
            text = user_scenario_text(scenario, self.domain.pack.phrasing if plain else None)
            return LLMUser(self.user_client, text, self.retries,
                           tools=[s.openai_schema() for s in self.domain.tools("user")])
        scenario = dict(task.scenario)
        if plain:
            scenario["challenges"] = []
        return ReactiveUser(scenario, self.domain.pack.phrasing,
                            device_tools=[s.name for s in self.domain.tools("user")])

    def _agent_turn(self, msgs: list[Message], policy: str, tools: list[dict]):
        """One model call with the task's policy and tools; an unusable reply is re-asked with the problem shown
        (not kept in the trajectory)."""
        from evosyn.agents.ask import RoleRejected, one_line
        from evosyn.agents.llm import LLMOutputError, LLMUnavailable

        base = teacher_messages(policy, self.domain.name, msgs)
        convo, problem = base, ""
        for attempt in range(self.retries + 1):
            try:
                res = self.client.chat_sync(convo, tools=tools, role="teacher", attempt=attempt)
            except LLMOutputError as exc:
                problem = one_line(str(exc))
            except LLMUnavailable as exc:
                raise RoleRejected(f"teacher: LLM unavailable: {one_line(str(exc))}") from None
            else:
                if res.tool_calls or (res.text or "").strip():
                    return res
                problem = "the reply had neither text nor a tool call"
            convo = [*base, {"role": "user", "content": f"(note from the system: your previous reply could not be "
                                                         f"used: {problem}. Reply again.)"}]
        raise RoleRejected(f"teacher: no usable reply after {self.retries + 1} attempts: {problem}")

    def rollout(self, task: SynthTask, attempt: int = 0, plain: bool = False) -> Trajectory:
        env_task = self.domain.task_from_json(task.definition)
        episode = self.domain.episode(env_task.initial_state)
        # the task's own context (the policy with its facts, the tools it leaves), as an agent on it is given
        policy, tools = self.domain.task_policy(env_task), self.tools
        if self.domain.task_context:
            tools = [s.openai_schema() for s in self.domain.tools_for(env_task)]
        user = self._user(task, plain)
        msgs: list[Message] = [user.opening()]
        msgs += device_turn(episode, user, msgs[0])
        termination, steps = "max_steps", 0
        while steps < self.max_steps and not getattr(user, "done", False):
            steps += 1
            res = self._agent_turn(msgs, policy, tools)
            if res.tool_calls:
                msgs += tool_turn(res, episode, steps)
                continue
            msgs.append(Message(role="assistant", content=res.text))
            reply = user.respond(res.text)
            msgs.append(reply)
            msgs += device_turn(episode, user, reply)
        if getattr(user, "done", False):
            termination = "user_stop"
        return Trajectory(run_id=task.run_id, round=task.round, space_version=task.space_version,
                          direction_id=task.direction_id, blueprint_id=task.blueprint_id,
                          trajectory_id=trajectory_id(task.task_id, attempt), task_id=task.task_id, messages=msgs,
                          producer="teacher" if attempt == 0 else "repair", attempt=attempt,
                          termination=termination)
