"""CAR-bench's reward, computed by our own replay of a trajectory (a pure function).

``reward(domain, task, messages, end_keyword=None)`` replays every assistant
tool call on a fresh episode of the task (the recorded tool messages are never
trusted) and the task's gold actions on another, then scores CAR-bench's
components. The reward starts at 1 and loses 1 per failed component, floored
at 0:

* ``state``: the final state equals the gold replay's, and every state the car
  was in when the assistant spoke to the user is one the gold replay passed
  through (the initial state included);
* ``tool_subset``: every tool of the gold actions was called;
* ``tool_execution``: no call was refused by its tool (``{"status": "FAILURE"}``);
* ``policy``: no AUT-POL violation (``evosyn.envs.car_bench.policy``) and, when a
  ``judge`` is given, none of the LLM-POL ones it reports;
* ``user_end``: the user did not end with a failure keyword
  (``HALLUCINATION_ERROR``, ``DISAMBIGUATION_ERROR``, ``OUT_OF_SCOPE``), and,
  on a hallucination task, no removed tool or parameter was used.

Hallucination tasks skip ``state``, ``tool_subset`` and ``policy`` (their
components read None). A phone call (``call_phone_by_number``) ends the
conversation: nothing after the turn that makes it is scored. ``end_keyword`` is the user simulator's last control
keyword; without one, a last user message that is exactly a keyword counts.

``pass_hat_k`` / ``pass_at_k`` turn several trials per task into CAR-bench's
Pass^k (all k trials succeed) and Pass@k (at least one does).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import comb
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from evosyn.envs.car_bench.family import uses_removed_part
from evosyn.envs.car_bench.policy import trajectory_violations
from evosyn.envs.car_bench.tasks import CarBenchTask
from evosyn.storage.records import Message, ToolCall

if TYPE_CHECKING:
    from evosyn.envs.car_bench.domain import CarBenchDomain

FAILURE_KEYWORDS = frozenset({"HALLUCINATION_ERROR", "DISAMBIGUATION_ERROR", "OUT_OF_SCOPE"})
TERMINATING_TOOLS = frozenset({"call_phone_by_number"})  # a phone call ends the conversation
# (task, messages) -> LLM-POL violations; CAR-bench asks an LLM, one policy at a time
Judge = Callable[[CarBenchTask, list[Message]], list[str]]


class CarBenchReward(BaseModel):
    """CAR-bench's reward and its components (None: skipped for this task type)."""

    model_config = ConfigDict(extra="forbid")

    reward: float
    r_actions_final: bool | None = None
    r_actions_intermediate: bool | None = None
    r_tool_subset: bool | None = None
    missing_tools: list[str] = Field(default_factory=list)
    r_tool_execution: bool = True
    tool_execution_errors: list[str] = Field(default_factory=list)
    r_policy: bool | None = None
    policy_errors: list[str] = Field(default_factory=list)
    r_user_end: bool = True
    end_keyword: str | None = None

    @property
    def failed(self) -> list[str]:
        """The names of the failed components."""
        state = self.r_actions_final is False or self.r_actions_intermediate is False
        return [name for name, bad in (("state", state), ("tool_subset", self.r_tool_subset is False),
                                       ("tool_execution", not self.r_tool_execution),
                                       ("policy", self.r_policy is False), ("user_end", not self.r_user_end)) if bad]


def gold_digests(domain: CarBenchDomain, task: CarBenchTask) -> list[str]:
    """The states the gold replay passes through: the initial one, then one after each gold tool action."""
    episode = domain.episode(task)
    digests = [episode.state_digest()]
    for action in task.tool_actions:
        episode.step(action.name, dict(action.kwargs))
        digests.append(episode.state_digest())
    return digests


def _last_keyword(messages: Sequence[Message]) -> str | None:
    last = next((m for m in reversed(messages) if m.role == "user"), None)
    text = (last.content or "").strip() if last is not None else ""
    return text if text in FAILURE_KEYWORDS else None


def reward(domain: CarBenchDomain, task: CarBenchTask, messages: Sequence[Message], end_keyword: str | None = None,
           judge: Judge | None = None) -> CarBenchReward:
    messages = list(messages)
    episode = domain.episode(task)
    spoken = [episode.state_digest()]  # CAR-bench records the state whenever the turn passes to the user
    called: set[str] = set()
    for n, m in enumerate(messages):
        if m.role != "assistant":
            continue
        if not m.tool_calls:
            spoken.append(episode.state_digest())
            called.add("respond")
        for call in m.tool_calls:
            episode.step(call.name, dict(call.arguments), call.requestor)
            called.add(call.name)
        if any(c.name in TERMINATING_TOOLS for c in m.tool_calls):
            messages = messages[:n + 1]  # the call ends the conversation: nothing after it happened
            break
    keyword = end_keyword if end_keyword is not None else _last_keyword(messages)
    hallucinated = [f"used removed part {p}" for p in episode.hallucinated]
    r_user_end = keyword not in FAILURE_KEYWORDS and not hallucinated
    out = CarBenchReward(reward=0.0, r_tool_execution=not episode.tool_errors,
                         tool_execution_errors=list(episode.tool_errors), r_user_end=r_user_end,
                         end_keyword=keyword or (hallucinated[0] if hallucinated else None))
    if not task.is_hallucination:
        gold = gold_digests(domain, task)
        out.r_actions_final = episode.state_digest() == gold[-1]
        out.r_actions_intermediate = set(spoken) <= set(gold)
        wanted = {a.name for a in task.actions if a.name != "respond"}
        out.missing_tools = sorted(wanted - called)
        out.r_tool_subset = not out.missing_tools
        out.policy_errors = [*episode.policy_errors, *trajectory_violations(messages, episode.state)]
        if judge is not None:
            out.policy_errors += judge(task, messages)
        out.r_policy = not out.policy_errors
    out.reward = max(0.0, 1.0 - len(out.failed))
    return out


def gold_trajectory(task: CarBenchTask, domain: CarBenchDomain) -> list[Message]:
    """The gold actions as a trajectory: the user's instruction, one assistant turn per action (with its
    observation) and a closing reply. On a hallucination task the actions that need a removed tool or
    parameter are left out and the assistant says it cannot do them (what a correct agent does)."""
    episode = domain.episode(task)
    out = [Message(role="user", content=task.instruction)]
    skipped = []
    for n, action in enumerate(task.tool_actions):
        if uses_removed_part(task, action.name, action.kwargs):
            skipped.append(action.name)
            continue
        call = ToolCall(id=f"call_{n}", name=action.name, arguments=dict(action.kwargs))
        obs = episode.step(call.name, dict(call.arguments))
        out += [Message(role="assistant", tool_calls=[call]),
                Message(role="tool", content=obs.content, tool_call_id=call.id, error=obs.error)]
    closing = f"Sorry, I cannot do that: {', '.join(skipped)} is not available." if skipped else "Done."
    out.append(Message(role="assistant", content=closing))
    return out


def _per_task(results: Mapping[str, Sequence[float]], k: int) -> list[tuple[int, int]]:
    out = []
    for task_id, rewards in results.items():
        if len(rewards) < k:
            raise ValueError(f"task {task_id} has {len(rewards)} trials, fewer than k={k}")
        out.append((len(rewards), sum(r >= 1.0 - 1e-6 for r in rewards)))
    return out


def pass_hat_k(results: Mapping[str, Sequence[float]], k: int) -> float:
    """Pass^k: the chance that k trials drawn from a task's n all succeed, averaged over tasks."""
    counts = _per_task(results, k)
    return sum(comb(c, k) / comb(n, k) for n, c in counts) / len(counts) if counts else 0.0


def pass_at_k(results: Mapping[str, Sequence[float]], k: int) -> float:
    """Pass@k: the chance that at least one of k trials drawn from a task's n succeeds, averaged over tasks."""
    counts = _per_task(results, k)
    return sum(1 - comb(n - c, k) / comb(n, k) for n, c in counts) / len(counts) if counts else 0.0
