"""Perturbed copies of a CAR-bench gold trajectory: what the verifier must reject.

``perturb(domain, task, gold, kind)`` returns the changed messages, or None
when the kind does not apply to the task. Each kind breaks one thing the
reward checks:

* ``write_dropped``: the last state-changing call is left out (the final state);
* ``argument_changed``: the last write gets another value (the final state);
* ``extra_write``: one more write the task never asked for (the final state);
* ``read_dropped``: the first look-up is left out (the gold tool subset, and for
  the sunroof, the weather check AUT-POL:009);
* ``refused_call``: one more call its tool refuses (a tool execution error);
* ``reordered_reply``: the last two writes swapped, with a reply to the user
  between them (an intermediate state the gold never passes through);
* ``failure_keyword``: the user ends with a failure keyword;
* ``removed_part_used``: a hallucination task's removed tool or parameter used anyway.

``trajectories(domain)`` is every official task's gold trajectory, its
``parallel`` variant (all calls in one turn) and every applicable
perturbation: the agreement set's input.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evosyn.envs.car_bench.family import uses_removed_part
from evosyn.envs.car_bench.reward import TERMINATING_TOOLS, gold_trajectory
from evosyn.envs.car_bench.tasks import CarBenchTask
from evosyn.storage.records import Message, ToolCall

if TYPE_CHECKING:
    from evosyn.envs.car_bench.domain import CarBenchDomain

KINDS = ("write_dropped", "argument_changed", "extra_write", "read_dropped", "refused_call", "reordered_reply",
         "failure_keyword", "removed_part_used")
_EXTRA = ToolCall(id="call_extra", name="set_ambient_lights", arguments={"on": True, "lightcolor": "PINK"})
_REFUSED = ToolCall(id="call_refused", name="set_fan_speed", arguments={"level": 9})


def _calls(messages: list[Message], domain: CarBenchDomain, kind: str) -> list[int]:
    """Indices of the assistant messages whose single call is of ``kind`` (read / write)."""
    return [i for i, m in enumerate(messages) if m.role == "assistant" and len(m.tool_calls) == 1
            and domain.tool_kind(m.tool_calls[0].name) == kind]


def _drop(messages: list[Message], i: int) -> list[Message]:
    """Without the call at ``i`` and the tool message answering it."""
    return messages[:i] + messages[i + 2:]


def _ends_early(messages: list[Message]) -> int | None:
    """The index of the turn whose call ends the conversation (a phone call), if any."""
    return next((i for i, m in enumerate(messages) if any(c.name in TERMINATING_TOOLS for c in m.tool_calls)), None)


def _with_call(messages: list[Message], call: ToolCall) -> list[Message]:
    """One more call (with a placeholder answer: the reward replays, it never reads answers) before the close,
    or before the phone call that ends the conversation."""
    at = _ends_early(messages)
    at = len(messages) - 1 if at is None else at
    return messages[:at] + [Message(role="assistant", tool_calls=[call]),
                            Message(role="tool", content="", tool_call_id=call.id)] + messages[at:]


def _changed(arguments: dict[str, Any]) -> dict[str, Any] | None:
    for key, value in arguments.items():
        if isinstance(value, bool):
            return {**arguments, key: not value}
        if isinstance(value, (int, float)):
            return {**arguments, key: value - 1 if value >= 1 else value + 1}
    return None


def perturb(domain: CarBenchDomain, task: CarBenchTask, gold: list[Message], kind: str) -> list[Message] | None:
    writes, reads = _calls(gold, domain, "write"), _calls(gold, domain, "read")
    if task.is_hallucination and kind in ("write_dropped", "argument_changed", "extra_write", "read_dropped",
                                          "reordered_reply"):
        return None  # CAR-bench does not score the state, tools or policy of a hallucination task
    if kind == "write_dropped" and writes:
        return _drop(gold, writes[-1])
    if kind == "argument_changed" and writes:
        call = gold[writes[-1]].tool_calls[0]
        changed = _changed(call.arguments)
        if changed is None:
            return None
        out = list(gold)
        out[writes[-1]] = Message(role="assistant", tool_calls=[call.model_copy(update={"arguments": changed})])
        return out
    if kind == "extra_write" and not any(a.name == _EXTRA.name for a in task.actions):
        return _with_call(gold, _EXTRA)
    if kind == "read_dropped" and reads:
        return _drop(gold, reads[0])
    if kind == "refused_call":
        return _with_call(gold, _REFUSED)
    if kind == "reordered_reply" and len(writes) >= 2:
        a, b = writes[-2], writes[-1]
        if gold[a].tool_calls[0].name == gold[b].tool_calls[0].name:
            return None
        reply = Message(role="assistant", content="One moment.")
        user = Message(role="user", content="Sure.")
        return gold[:a] + gold[b:b + 2] + [reply, user] + gold[a:a + 2] + gold[a + 2:b] + gold[b + 2:]
    if kind == "failure_keyword" and _ends_early(gold) is None:  # after a phone call the user says nothing
        keyword = "DISAMBIGUATION_ERROR" if task.family == "disambiguation" else (
            "HALLUCINATION_ERROR" if task.is_hallucination else "OUT_OF_SCOPE")
        return gold + [Message(role="user", content=keyword)]
    if kind == "removed_part_used" and task.is_hallucination:
        action = next((a for a in task.tool_actions if uses_removed_part(task, a.name, a.kwargs)), None)
        if action is None:
            return None
        return _with_call(gold, ToolCall(id="call_removed", name=action.name, arguments=dict(action.kwargs)))
    return None


def parallel(gold: list[Message]) -> list[Message]:
    """The gold calls made all at once, in one assistant turn (CAR-bench runs parallel calls in order). Not a
    perturbation: it passes unless a rule wants a look-up in an earlier turn (the weather before the sunroof)."""
    calls = [c for m in gold if m.role == "assistant" for c in m.tool_calls]
    if len(calls) < 2:
        return gold
    answers = [m for m in gold if m.role == "tool"]
    return [gold[0], Message(role="assistant", tool_calls=calls), *answers, gold[-1]]


def trajectories(domain: CarBenchDomain) -> list[tuple[CarBenchTask, str, list[Message]]]:
    """Every official task's gold trajectory, its ``parallel`` variant (two or more calls) and its perturbations."""
    out = []
    for task in domain.tasks():
        gold = gold_trajectory(task, domain)
        out.append((task, "gold", gold))
        if (together := parallel(gold)) is not gold:
            out.append((task, "parallel", together))
        out.extend((task, kind, m) for kind in KINDS if (m := perturb(domain, task, gold, kind)) is not None)
    return out
