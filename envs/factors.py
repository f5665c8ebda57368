"""Observed factors: what a realized trajectory actually did, re-derived from its replay.

Never taken from the plan. Rules (all deterministic, documented here):

- ``num_write``: state-changing calls (tau2 WRITE tools whose call changed the
  replayed state; a failed or no-op write does not count), bucketed 0/1/2/3-4/5+.
- ``num_read``: READ tool calls, same buckets.
- ``trajectory_pattern``: one symbol per call (R read, W write, C compute =
  the pack's ``compute_tools``, T transfer = its ``transfer_tools``), runs collapsed: "R-W-R-W".
- ``state_change_type``: the kind of the state-changing writes (the pack's
  ``change_kind_by_prefix``, else "modify"), "mixed" for several kinds, "none".
- ``computation``: "required" if ``calculate`` was called or a numeric argument of
  a write is not a number the user stated (the agent derived it from
  observations), else "none".
- ``expected_outcome``: "fulfill" if state changed; otherwise "refuse" if the
  assistant declined (refusal wording) and "fulfill" for pure information requests.
- ``tool_use_pattern``: the tool-use shapes of the realized calls (envs/tool_patterns.py).
- ``task_family`` and ``policy_or_constraint_focus``: the domain pack's maps from the
  state-changing tools; with no state change, the pack's keywords of the user's request.
- every other trajectory property of ``envs/properties.py`` (entities touched, multi-item
  writes, money moves, ...), measured on the replayed calls.
"""
from __future__ import annotations

import re
from typing import Iterable

from evosyn.envs.packs import DomainPack
from evosyn.envs.properties import BUCKETS, PROPERTIES, Call, bucket, measure_all
from evosyn.envs.replay import ReplayResult, StepRecord
from evosyn.envs.tool_patterns import tool_use_patterns
from evosyn.storage.records import Message

__all__ = ["BUCKETS", "GATED", "bucket", "observe", "pattern"]

# the observed factors the verifier's factor gate compares with a blueprint's request: every property
# (envs/properties.py) and two derived factors
GATED = frozenset(PROPERTIES) | {"computation", "state_change_type"}
_MEASURED = tuple(k for k in PROPERTIES if k not in ("num_write", "num_read"))  # the two counts: observe's own


_REFUSAL = re.compile(r"\b(cannot|can't|can not|unable to|not able to|not eligible|not allowed|"
                      r"not permitted|i'm sorry|unfortunately|against (our|the) policy)\b", re.I)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _symbol(step: StepRecord, pack: DomainPack) -> str | None:
    if step.call.name in pack.transfer_tools:
        return "T"
    if step.call.name in pack.compute_tools:
        return "C"
    return {"read": "R", "write": "W"}.get(step.kind)


def pattern(steps: Iterable[StepRecord], pack: DomainPack | None = None) -> str:
    pack = pack or DomainPack()
    out: list[str] = []
    for step in steps:
        sym = _symbol(step, pack)
        if sym and (not out or out[-1] != sym):
            out.append(sym)
    return "-".join(out) or "none"


def _numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def _derived(writes: list[StepRecord], messages: list[Message]) -> bool:
    """A numeric argument of a state-changing write is not a number the user stated."""
    numbers = [n for s in writes for n in _numbers(s.call.arguments)]
    if not numbers:
        return False
    user_text = " ".join(m.content or "" for m in messages if m.role == "user")
    stated = {float(x) for x in _NUMBER.findall(user_text)}
    return any(n not in stated for n in numbers)


def observe(pack: DomainPack, replay: ReplayResult, messages: list[Message]) -> dict[str, list[str]]:
    """The observed factors of a replayed trajectory, read through its domain ``pack``'s maps."""
    steps = replay.steps
    writes = [s for s in steps if s.kind == "write" and s.changed_state and not s.error]
    reads = [s for s in steps if s.kind == "read"]
    computed = any(s.call.name in pack.compute_tools for s in steps) or _derived(writes, messages)
    kinds = set()
    for s in writes:
        kinds.add(next((k for prefix, k in pack.change_kind_by_prefix if s.call.name.startswith(prefix)), "modify"))
    change = "none" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
    # a state change is a fulfilment whatever was said: the refusal wording is searched only without one
    refused = not writes and any(m.role == "assistant" and m.content and _REFUSAL.search(m.content) for m in messages)
    outcome = "refuse" if refused else "fulfill"
    families = pack.family_by_tool
    family = next((families[s.call.name] for s in writes if s.call.name in families), None)
    if family is None:
        first_user = next((m.content or "" for m in messages if m.role == "user" and m.content), "").lower()
        family = next((f for kw, f in pack.family_keywords if kw in first_user), pack.default_family)
    focus = sorted({pack.focus_by_tool.get(s.call.name) for s in writes} - {None})
    calls = [Call(s.call.name, s.call.arguments, s.kind, by_user=s.call.requestor == "user",
                  changed=s.changed_state and not s.error) for s in steps]
    return {
        "num_write": [bucket(len(writes))],  # first, as PROPERTIES orders them: the stored dicts keep this order
        "num_read": [bucket(len(reads))],
        **{k: [v] for k, v in measure_all(calls, pack, _MEASURED).items()},
        "trajectory_pattern": [pattern(steps, pack)],
        "tool_use_pattern": tool_use_patterns(pack, steps, messages, refused=outcome == "refuse"),
        "state_change_type": [change],
        "computation": ["required" if computed else "none"],
        "expected_outcome": [outcome],
        "task_family": [family],
        "policy_or_constraint_focus": focus,
    }

