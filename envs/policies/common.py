"""Rules shared by domains whose policy demands explicit confirmation before writes."""
from __future__ import annotations

import re

from evosyn.envs.base import Episode
from evosyn.storage.records import Message, ToolCall

_YES = re.compile(r"\b(yes|yeah|yep|confirm(ed)?|go ahead|proceed|sure|correct|please do|ok(ay)?)\b", re.I)
_NO = re.compile(r"\b(no|don't|do not|cancel that|stop|wait)\b", re.I)
_GENERIC_WORDS = ("to", "and", "the")


def action_stems(tool_name: str, stopwords: tuple[str, ...] = ()) -> list[str]:
    """Stems that a description of this action must mention (e.g. 'cance', 'bagga'), less the domain's
    stopwords (words of its tool names a description need not repeat, e.g. the entity every tool acts on)."""
    skip = set(_GENERIC_WORDS) | set(stopwords)
    return [w[:5] for w in tool_name.split("_") if w not in skip]


def confirmation_rule(episode: Episode, call: ToolCall, history: list[Message]) -> list[str]:
    """Explicit user confirmation of *this* action since the previous write.

    ``history`` ends with the assistant message that makes ``call``. The user's
    latest text message must say yes, and the assistant text just before it
    must describe the action (its verb stems and the ids it acts on).
    """
    if call.requestor != "assistant":
        return []
    window = history[:-1] if history and call in history[-1].tool_calls else history
    for i in range(len(window) - 1, -1, -1):
        if window[i].role == "assistant" and any(_is_write(episode, c) for c in window[i].tool_calls):
            window = window[i + 1:]
            break
    user_at = next((i for i in range(len(window) - 1, -1, -1)
                    if window[i].role == "user" and window[i].content and not window[i].tool_calls), None)
    answer = window[user_at].content if user_at is not None else ""
    if user_at is None or not _YES.search(answer) or _NO.match(answer.strip()):
        return [f"[confirmation] {call.name}: no explicit user confirmation (yes) before this write"]
    request = next((window[i] for i in range(user_at - 1, -1, -1)
                    if window[i].role == "assistant" and window[i].content), None)
    if request is None:
        return [f"[confirmation] {call.name}: the user was never asked to confirm this action"]
    text = (request.content or "").lower()
    missing = [s for s in action_stems(call.name, _stopwords(episode)) if s not in text]
    missing += [str(v).lower() for k, v in call.arguments.items()
                if k.endswith("_id") and isinstance(v, str) and str(v).lower() not in text]
    if missing:
        return [f"[confirmation] {call.name}: the confirmation request does not describe this action "
                f"(missing {missing})"]
    return []


def _is_write(episode: Episode, call: ToolCall) -> bool:
    domain = getattr(episode, "domain", None)
    kind = domain.tool_kind(call.name, call.requestor) if domain is not None else None
    return kind == "write"


def _stopwords(episode: Episode) -> tuple[str, ...]:
    domain = getattr(episode, "domain", None)
    return domain.pack.confirmation_stopwords if domain is not None else ()
