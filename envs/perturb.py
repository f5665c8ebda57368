"""Perturbed copies of a trajectory, for auditing the verifier against tau2's evaluator.

Each perturbation edits the tool calls of a (gold) trajectory and then
re-executes them, so every observation is what the environment really returns
(except ``tampered_observation``, which edits one recorded observation and
must fail replay). Kinds: a write dropped, a read dropped, an argument
changed, two writes swapped (calls only: the confirmation dialogue stays
where it was), an extra write, a tampered observation, and (dual-control
domains) a device action the user performed dropped.
"""
from __future__ import annotations

import copy
from typing import Any

from evosyn.envs.base import Domain, EnvTask
from evosyn.storage.records import Message, ToolCall

KINDS = ("write_dropped", "read_dropped", "argument_changed", "writes_swapped", "extra_write",
         "tampered_observation", "device_write_dropped")


def rematerialize(domain: Domain, task: EnvTask, messages: list[Message]) -> list[Message]:
    """Re-execute every call on a fresh episode and rewrite the tool messages it answers."""
    episode = domain.episode(task.initial_state)
    out = [m.model_copy(deep=True) for m in messages]
    pending: dict[str, ToolCall] = {}
    for m in out:
        for c in m.tool_calls:
            pending[c.id] = c
        if m.role == "tool" and m.tool_call_id in pending:
            c = pending.pop(m.tool_call_id)
            obs = episode.step(c.name, c.arguments, c.requestor)
            m.content, m.error = obs.content, obs.error
    return out


def _call_positions(domain: Domain, messages: list[Message], kind: str) -> list[int]:
    return [i for i, m in enumerate(messages) if m.tool_calls and m.role == "assistant"
            and domain.tool_kind(m.tool_calls[0].name, m.tool_calls[0].requestor) == kind]


def _device_writes(domain: Domain, messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.tool_calls and m.role == "user"
            and domain.tool_kind(m.tool_calls[0].name, "user") == "write"]


def _drop_call(messages: list[Message], i: int) -> list[Message]:
    return messages[:i] + messages[i + 2:]  # the call and the tool message that answers it


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + ("X" if not value.endswith("X") else "Y") if value else "X"
    if isinstance(value, list) and value:
        return value[:-1] if len(value) > 1 else [_changed(value[0])]
    if isinstance(value, dict) and value:
        k = sorted(value)[0]
        return {**value, k: _changed(value[k])}
    return value


def _extra_write_call(domain: Domain, messages: list[Message]) -> ToolCall | None:
    """The domain pack's extra state-changing call for a trajectory with these calls (None: it has none)."""
    return domain.pack.extra_write([c.arguments for m in messages for c in m.tool_calls])


def perturb(domain: Domain, task: EnvTask, messages: list[Message], kind: str) -> list[Message] | None:
    """A perturbed copy, or None when the trajectory has nothing to perturb that way."""
    msgs = [m.model_copy(deep=True) for m in messages]
    writes, reads = _call_positions(domain, msgs, "write"), _call_positions(domain, msgs, "read")
    if kind == "write_dropped" and writes:
        return rematerialize(domain, task, _drop_call(msgs, writes[0]))
    if kind == "read_dropped" and reads:
        return rematerialize(domain, task, _drop_call(msgs, reads[0]))
    if kind == "argument_changed" and (writes or reads):
        i = (writes or reads)[0]
        call = msgs[i].tool_calls[0]
        if not call.arguments:
            return None
        key = sorted(call.arguments)[0]
        call.arguments = {**call.arguments, key: _changed(copy.deepcopy(call.arguments[key]))}
        return rematerialize(domain, task, msgs)
    if kind == "writes_swapped":
        distinct = [(a, b) for n, a in enumerate(writes) for b in writes[n + 1:]
                    if (msgs[a].tool_calls[0].name, msgs[a].tool_calls[0].arguments)
                    != (msgs[b].tool_calls[0].name, msgs[b].tool_calls[0].arguments)]
        if not distinct:
            return None
        a, b = distinct[0]
        ca, cb = msgs[a].tool_calls[0], msgs[b].tool_calls[0]
        msgs[a].tool_calls[0] = cb.model_copy(update={"id": ca.id})
        msgs[b].tool_calls[0] = ca.model_copy(update={"id": cb.id})
        return rematerialize(domain, task, msgs)
    if kind == "extra_write":
        call = _extra_write_call(domain, msgs)
        if call is None:
            return None
        at = len(msgs) - 1  # before the closing message
        msgs[at:at] = [Message(role="assistant", tool_calls=[call]),
                       Message(role="tool", content="", tool_call_id=call.id)]
        return rematerialize(domain, task, msgs)
    if kind == "device_write_dropped":
        device = _device_writes(domain, msgs)
        return rematerialize(domain, task, _drop_call(msgs, device[0])) if device else None
    if kind == "tampered_observation":
        tool_msgs = [m for m in msgs if m.role == "tool" and m.content]
        if not tool_msgs:
            return None
        tool_msgs[0].content = tool_msgs[0].content.replace('"', "'", 1) + " "
        return msgs
    return None

