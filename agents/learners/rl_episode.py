"""One synthesized task as a reinforcement-learning episode, a turn at a time: the trainer's policy answers, the task's
environment executes its tool calls, the task's user replies, and the verifier scores the whole conversation.

``converse`` (``harness.py``) runs the same loop with an agent that is called; a trainer instead owns the loop and
hands each of the policy's turns in (``RLEpisode.step``), so the episode keeps the conversation as the project
records it (``Message`` records, the user's device calls included) and gives the policy back only what it sees (chat
messages: tool results, the user's words). ``score`` is ``evosyn verify``'s verdict on that conversation: reward 1
when every check holds, else 0, each check reported by name. Nothing in here raises on the policy's output: a call
with unreadable arguments stays a call (the verifier's ``executable`` check says why), a tool that raises is an error
observation, and a verifier that cannot judge the conversation gives reward 0 with its reason.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from evosyn.agents.learners.exports import agent_turns, openai_turns
from evosyn.agents.user import ReactiveUser, device_turn
from evosyn.agents.verifier import verify
from evosyn.envs.base import Domain
from evosyn.storage.records import Message, SynthTask, ToolCall, Trajectory

log = logging.getLogger("evosyn.rl")
CHECKS = ("executable", "replay", "state", "actions", "communicate", "policy", "factors")
TERMINATIONS = ("user_stop", "user_error", "max_steps")


@dataclass(frozen=True)
class Score:
    """The verifier's judgement of one episode: ``reward`` 1/0 (every check held), tau2's reward basis beside it,
    each check 1/0 (a skipped check counts as held), and why it failed (``reason``: the failed checks' reasons, or
    what kept the verifier from judging)."""

    reward: float
    benchmark_reward: float
    checks: dict[str, float]
    reason: str = ""

    def metrics(self) -> dict[str, float]:
        return {"benchmark_reward": self.benchmark_reward, **{f"check_{k}": v for k, v in self.checks.items()}}


def chat_view(messages: list[Message]) -> list[dict[str, Any]]:
    """What the policy sees of these messages: chat messages, one per tool result, a user's device results folded
    into the user's turn (as the training exports write them)."""
    return openai_turns(agent_turns(messages, complete=False), "")


def assistant_message(reply: Any) -> Message:
    """The policy's turn (an OpenAI chat message as a dict or an object with the same fields: ``content``,
    ``tool_calls`` each ``{id, function: {name, arguments}}`` or ``{id, name, arguments}``) as a record. Arguments
    that are not a JSON object are kept as ``{"_unparsed": ...}``: the verifier's executable check says why."""
    m = reply if isinstance(reply, dict) else (reply.model_dump() if hasattr(reply, "model_dump") else vars(reply))
    calls = []
    for n, tc in enumerate(m.get("tool_calls") or []):
        if isinstance(tc, str):  # verifiers keeps a message's tool calls as JSON text in its outputs
            try:
                tc = json.loads(tc)
            except ValueError:
                tc = {"name": "", "arguments": tc}  # no call to read: the executable check says so
        tc = tc if isinstance(tc, dict) else (tc.model_dump() if hasattr(tc, "model_dump") else vars(tc))
        if not isinstance(tc, dict):
            tc = {"name": "", "arguments": tc}
        fn = tc.get("function") or tc
        raw = fn.get("arguments")
        if isinstance(raw, dict):
            args: Any = raw
        else:
            try:
                args = json.loads(raw or "{}")
            except (TypeError, ValueError):
                args = {"_unparsed": raw}
        calls.append(ToolCall(id=str(tc.get("id") or f"call_{n}"), name=str(fn.get("name") or ""),
                              arguments=args if isinstance(args, dict) else {"_unparsed": args}))
    content = m.get("content")
    if isinstance(content, list):  # content parts: the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return Message(role="assistant", content=content or None, tool_calls=calls)


@dataclass
class RLEpisode:
    """A task's episode between a trainer's policy and the task's environment and embedded user.

    ``opening()`` gives the first chat messages (system policy, the user's opening); then ``step(reply)`` per
    policy turn returns the chat messages the policy sees next, until ``done``; ``score()`` judges it.
    """

    task: SynthTask
    env: Domain
    max_steps: int = 40
    messages: list[Message] = field(default_factory=list)
    termination: str = ""
    steps: int = 0

    def __post_init__(self) -> None:
        if self.task.domain != self.env.name:
            raise ValueError(f"task {self.task.task_id} is of domain {self.task.domain!r}, not {self.env.name!r}")
        self.env_task = self.env.task_from_json(self.task.definition)
        self.episode = self.env.episode(self.env_task.initial_state)
        self.user = ReactiveUser(self.task.scenario, self.env.pack.phrasing,
                                 device_tools=[t.name for t in self.env.tools("user")])

    @property
    def done(self) -> bool:
        return bool(self.termination)

    def tools(self) -> list[dict[str, Any]]:
        """The task's tools as the OpenAI ``tools`` request field."""
        return [t.openai_schema() for t in self.env.tools_for(self.env_task)]

    def policy(self) -> str:
        return self.env.task_policy(self.env_task)

    def opening(self) -> list[dict[str, Any]]:
        said = self.user.opening()
        self.messages = [said, *device_turn(self.episode, self.user, said)]
        if getattr(self.user, "done", False):
            self.termination = "user_stop"
        return [{"role": "system", "content": self.policy()}, *chat_view(self.messages)]

    def step(self, reply: Any) -> list[dict[str, Any]]:
        """The policy's turn in, what it sees next out (tool results, or the user's reply)."""
        if self.done:
            raise RuntimeError(f"episode of task {self.task.task_id} ended ({self.termination})")
        turn = reply if isinstance(reply, Message) else assistant_message(reply)
        self.messages.append(turn)
        self.steps += 1
        if turn.tool_calls:
            results = []
            for call in turn.tool_calls:
                try:
                    obs = self.episode.step(call.name, call.arguments, call.requestor)
                    content, error = obs.content, obs.error
                except Exception as exc:  # noqa: BLE001 - a tool of the task's environment raised: an error result
                    log.warning("task %s: tool %s raised %s: %s", self.task.task_id, call.name,
                                type(exc).__name__, exc)
                    content, error = f"Error: {type(exc).__name__}: {exc}", True
                results.append(Message(role="tool", content=content, tool_call_id=call.id, error=error))
            self.messages.extend(results)
            if not self.done and self.steps >= self.max_steps:
                self.termination = "max_steps"
            return [{"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content or ""} for r in results]
        else:
            try:
                answer = self.user.respond(turn.content or "")
            except Exception as exc:  # noqa: BLE001 - the user could not answer: the episode ends as tau2's USER_ERROR
                log.warning("task %s: the user gave up (%s: %s)", self.task.task_id, type(exc).__name__, exc)
                self.termination = "user_error"
                return []
            new = [answer, *device_turn(self.episode, self.user, answer)]
            self.messages.extend(new)
            if self.user.done:
                self.termination = "user_stop"
        if not self.done and self.steps >= self.max_steps:
            self.termination = "max_steps"
        return chat_view(new)

    def trajectory(self) -> Trajectory:
        t = self.task
        return Trajectory(run_id=t.run_id, round=t.round, space_version=t.space_version,
                          direction_id=t.direction_id, blueprint_id=t.blueprint_id,
                          trajectory_id=f"rl-{t.task_id}", task_id=t.task_id, messages=list(self.messages),
                          producer="learner", termination=self.termination or "max_steps")

    def score(self) -> Score:
        return score(self.task, self.trajectory(), self.env)


def score(task: SynthTask, trajectory: Trajectory, env: Domain) -> Score:
    """``evosyn verify``'s verdict on a trajectory of a task, as a reward: 1 when every check holds, else 0, with
    each check; a trajectory the verifier cannot judge (malformed) gets 0 and the reason, never an exception."""
    try:
        verdict = verify(task.model_copy(update={"requested": {}}), trajectory, env)
    except Exception as exc:  # noqa: BLE001 - whatever the policy produced, the rollout gets a reward
        reason = f"unverifiable: {type(exc).__name__}: {exc}"
        log.warning("task %s: reward 0 (%s)", task.task_id, reason)
        return Score(0.0, 0.0, {c: 0.0 for c in CHECKS}, reason)
    checks = {c.name: float(c.passed or c.skipped) for c in verdict.checks}
    reason = "; ".join(f"{c.name}: {c.reason}" for c in verdict.failed())
    return Score(float(verdict.passed), float(verdict.reward), checks, reason)
