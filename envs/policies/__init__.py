"""Machine-checkable policy rules per domain (each pack's ``policy_rules``), checked before each write.

A rule set is a function ``(episode, call, history) -> list[str]`` of violations,
evaluated on the state *before* the call executes. Domains without a rule set
are reported as "not checked", never as passing.
"""
from __future__ import annotations

from typing import Callable

from evosyn.envs.base import Episode
from evosyn.storage.records import Message, ToolCall

Rule = Callable[[Episode, ToolCall, list[Message]], list[str]]  # a pack's ``policy_rules()``


def rule_code(violation: str) -> str:
    return violation[1:violation.index("]")] if violation.startswith("[") and "]" in violation else ""
