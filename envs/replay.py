"""Deterministic replay of a trajectory's tool calls on a fresh episode (pure functions).

The verifier never trusts what a trajectory claims: it re-executes every tool
call from the task's initial state, compares each recorded observation with the
real one, and hashes the final state. Gold actions are replayed the same way
to get the target state.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache, cached

from evosyn.envs.base import Domain, EnvTask, Episode
from evosyn.envs.pack_errors import run_tool
from evosyn.storage.records import Message, ToolCall


@dataclass
class StepRecord:
    call: ToolCall
    recorded: Message | None  # the tool message that followed the call in the trajectory
    observed: str = ""
    error: bool = False
    changed_state: bool = False
    kind: str = "generic"


@dataclass
class ReplayResult:
    steps: list[StepRecord] = field(default_factory=list)
    structure_errors: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    digest: str = ""
    episode: Episode | None = None


def pair_tool_calls(messages: list[Message]) -> tuple[list[tuple[ToolCall, Message | None]], list[str]]:
    """Each tool call with the tool message that answers it (by position and id), like tau2."""
    pairs, errors = [], []
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if m.role == "tool":
            errors.append(f"message {i - 1}: tool message without a preceding tool call")
            continue
        for call in m.tool_calls:
            answer = messages[i] if i < len(messages) else None
            if answer is None or answer.role != "tool":
                errors.append(f"tool call {call.name} ({call.id}) has no tool message after it")
                pairs.append((call, None))
                continue
            if answer.tool_call_id != call.id:
                errors.append(f"tool call id mismatch: {call.id} answered by {answer.tool_call_id}")
            pairs.append((call, answer))
            i += 1
    return pairs, errors


# Called before each call is replayed (policy checks); it must not change the episode's state.
BeforeCall = Callable[[Episode, ToolCall, list[Message]], None]


def replay(domain: Domain, initial_state: Any, messages: list[Message],
           before_call: BeforeCall | None = None, track_changes: bool = True) -> ReplayResult:
    pairs, errors = pair_tool_calls(messages)
    episode = domain.episode(initial_state)
    result = ReplayResult(structure_errors=errors, episode=episode)
    position = {id(m): n for n, m in enumerate(messages)} if before_call is not None else {}
    latest = ""  # the digest of the state as it is now, when taken since the last step
    for call, recorded in pairs:
        kind = domain.tool_kind(call.name, call.requestor) or "unknown"
        if before_call is not None:
            upto = position.get(id(recorded), len(messages)) if recorded is not None else len(messages)
            before_call(episode, call, messages[:upto])
        before = (latest or episode.state_digest()) if (track_changes and kind == "write") else ""
        obs = run_tool(episode, call.name, call.arguments, call.requestor)
        latest = ""
        step = StepRecord(call=call, recorded=recorded, observed=obs.content, error=obs.error, kind=kind)
        if before:
            latest = episode.state_digest()
            step.changed_state = latest != before
        if recorded is not None and (recorded.content or "") != obs.content:
            result.mismatches.append(f"{call.name} ({call.id}): recorded observation differs from replay")
        result.steps.append(step)
    result.digest = latest or episode.state_digest()
    return result


def fill_observations(domain: Domain, initial_state: Any, messages: list[Message]
                      ) -> tuple[list[Message], list[StepRecord]]:
    """``messages`` with each tool call's tool message holding what the tool returns on replay (a hand-typed
    output must match it byte for byte); a call with no tool message after it gets one. Returns the filled
    messages and the steps whose tool message differed or was missing (``recorded`` is None for the latter)."""
    rep = replay(domain, initial_state, messages, track_changes=False)
    steps, changed, out, i = iter(rep.steps), [], [], 0
    while i < len(messages):  # paired as pair_tool_calls pairs them: a call's answer is the next tool message
        m = messages[i]
        i += 1
        out.append(m)
        if m.role == "tool":  # a tool message with no call before it: nothing to fill it from
            continue
        for call in m.tool_calls:
            step = next(steps)
            answer = messages[i] if i < len(messages) and messages[i].role == "tool" else None
            if answer is not None:
                i += 1
                if (answer.content or "") == step.observed and answer.error == step.error:
                    out.append(answer)
                    continue
                out.append(answer.model_copy(update={"content": step.observed, "error": step.error,
                                                     "tool_call_id": answer.tool_call_id or call.id}))
            else:
                out.append(Message(role="tool", content=step.observed, tool_call_id=call.id, error=step.error,
                                   requestor=call.requestor))
            changed.append(step)
    return out, changed


def task_key(task: EnvTask) -> str:
    return task.key()


def _replay_gold(domain: Domain, task: EnvTask) -> tuple[str, list[bool]]:
    episode = domain.episode(task.initial_state)
    changed, latest = [], ""
    for action in task.gold_actions:
        kind = domain.tool_kind(action.name, action.requestor)
        before = (latest or episode.state_digest()) if kind == "write" else ""
        run_tool(episode, action.name, action.arguments, action.requestor)
        latest = episode.state_digest() if before else ""
        changed.append(bool(before) and latest != before)
    return latest or episode.state_digest(), changed


def cached_gold_replay(maxsize: int) -> Callable[[Domain, EnvTask], tuple[str, list[bool]]]:
    """``gold_replay`` with its own cache of ``maxsize`` (domain, task) entries, least recently used
    evicted first, behind a lock (verifiers run in worker threads). ``.cache_clear()`` empties it."""
    return cached(LRUCache(maxsize=maxsize), key=lambda domain, task: (domain.name, task_key(task)),
                  lock=threading.Lock())(_replay_gold)


GOLD_CACHE_SIZE = 20_000
# Final-state digest after the task's gold actions, and which gold writes changed state.
gold_replay = cached_gold_replay(GOLD_CACHE_SIZE)


def gold_digest(domain: Domain, task: EnvTask) -> str:
    """The gold final-state digest in the form a task stores it (``<digest scheme>:<digest>``), so a
    verifier in any process skips the gold replay; '' for a domain whose digests are not stored."""
    if not domain.digest_scheme:
        return ""
    return f"{domain.digest_scheme}:{gold_replay(domain, task)[0]}"


def stored_gold_digest(domain: Domain, stored: str) -> str | None:
    """The digest of a stored ``gold_digest`` if this domain computes digests of the same form, else None."""
    scheme, _, digest = stored.rpartition(":")
    return digest if scheme and domain.digest_scheme and scheme == domain.digest_scheme else None


def arguments_key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)
