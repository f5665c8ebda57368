"""The policy's machine-checked rules: ``check_write`` runs before each write, on the state before it.

Each violation starts with its rule code in brackets; the verifier's ``policy`` check fails on any of them,
and the embedded generator's refusals name the rule a request would break. Without this file no rule is
checked (``evosyn envs check`` warns).
"""
from __future__ import annotations

from evosyn.envs.base import Episode
from evosyn.storage.records import Message, ToolCall

from .environment import MAX_BOOKINGS

OFFICIAL_WAIVERS: dict[str, dict[str, str]] = {}  # official task id -> {rule code: why its gold may break it}


def check_write(episode: Episode, call: ToolCall, history: list[Message]) -> list[str]:
    state = episode.state  # type: ignore[attr-defined]  # this domain's GymEpisode
    member = state.members.get(call.arguments.get("member_id", ""))
    if call.name == "book_class" and member is not None and len(member.bookings) >= MAX_BOOKINGS:
        return [f"[booking_limit] {member.member_id} already has {len(member.bookings)} classes booked"]
    return []
