"""Machine-checkable policy rules per domain, checked before each state-changing call.

A rule set is a function ``(episode, call, history) -> list[str]`` of violations,
evaluated on the state *before* the call executes. Domains without a rule set
are reported as "not checked", never as passing.
"""
from __future__ import annotations

from typing import Callable

from envs.base import Episode
from storage.records import Message, ToolCall

Rule = Callable[[Episode, ToolCall, list[Message]], list[str]]


def rules_for(domain: str) -> Rule | None:
    if domain == "airline":
        from envs.policies.airline import check_write
        return check_write
    if domain == "retail":
        from envs.policies.common import confirmation_rule
        return confirmation_rule
    return None


def waivers_for(domain: str) -> dict[str, dict[str, str]]:
    """Rule waivers for official tasks whose gold actions contradict the policy text."""
    if domain == "airline":
        from envs.policies.airline import OFFICIAL_WAIVERS
        return OFFICIAL_WAIVERS
    return {}


def rule_code(violation: str) -> str:
    return violation[1:violation.index("]")] if violation.startswith("[") and "]" in violation else ""
