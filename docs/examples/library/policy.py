"""The library policy's machine-checkable rules, checked before each write (``check_write``).

Each violation starts with a rule code in brackets; the verifier's ``policy`` check fails on any of them.
"""
from __future__ import annotations

from evosyn.envs.base import Episode
from evosyn.envs.policies.common import confirmation_rule
from evosyn.storage.records import Message, ToolCall

from .environment import MAX_LOANS

OFFICIAL_WAIVERS: dict[str, dict[str, str]] = {}  # no official tasks, so nothing to waive


def check_write(episode: Episode, call: ToolCall, history: list[Message]) -> list[str]:
    db = episode.env.tools.db  # type: ignore[attr-defined]
    out = confirmation_rule(episode, call, history)
    member = db.members.get(call.arguments.get("member_id", ""))
    if call.name == "borrow_book" and member is not None:
        if len(member.loans) >= MAX_LOANS:
            out.append(f"[loan_limit] {member.member_id} already holds {len(member.loans)} books")
        if member.fines > 0:
            out.append(f"[unpaid_fines] {member.member_id} has {member.fines} euros of unpaid fines")
    return out
