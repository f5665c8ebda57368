"""How the data's agent talks, read from the trajectories: what each move is, and how it is worded.

A reply is told apart by its opening words (``say:`` and the first three), a
description of a call for the user to confirm by the project's confirmation
wording (``evosyn.envs.gold``), a call by its tool. From the data the learner reads:
which tools are writes (the ones confirmed before they were called), the most
common wording of each reply, the replies that end in a list of values (and the
text before it), the reply that ends conversations, and the replies that ask
the user to make a call themselves (dual control), as templates.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from evosyn.envs.gold import confirmation_request
from evosyn.storage.records import Message, ToolCall, Trajectory

CONFIRM_STEM = confirmation_request("\0", {}).split("\0")[0]  # how the project's agents open a confirmation


def render(value: Any, cents: bool = False) -> str:
    """A value as a reply writes it; ``cents``: a number with two decimals (as the data may write amounts)."""
    if cents and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.2f}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def norm_text(text: str) -> str:
    return " " + " ".join(text.lower().replace(",", "").replace(";", " ").rstrip(".").split()) + " "


def label_of(msg: Message) -> str:
    """The move a message makes: ``tool:NAME``, ``say:confirm``, or ``say:`` and its first three words."""
    if msg.tool_calls:
        return f"tool:{msg.tool_calls[0].name}"
    content = msg.content or ""
    if CONFIRM_STEM and CONFIRM_STEM in content:
        return "say:confirm"
    return "say:" + "_".join(re.findall(r"[a-z']+", content.lower())[:3])


NAME_SLOT, ARGS_SLOT = "\x00name\x00", "\x00args\x00"


def asked_call(msgs: list[Message], i: int) -> ToolCall | None:
    """The call the user made in answer to reply ``i`` (dual control: the agent asked for a device action)."""
    nxt = msgs[i + 1] if i + 1 < len(msgs) else None
    return nxt.tool_calls[0] if nxt is not None and nxt.role == "user" and nxt.tool_calls else None


def request_template(text: str, call: ToolCall) -> tuple[str, str, str] | None:
    """The reply with the call's name and arguments cut out: (template, name style, argument style)."""
    for name_style, name in (("raw", call.name), ("spaced", call.name.replace("_", " "))):
        if name not in text:
            continue
        template = text.replace(name, NAME_SLOT, 1)
        for args_style in ("sorted", "plain"):
            rendered = args_text(call.arguments, args_style)
            if call.arguments and rendered in template:
                return template.replace(rendered, ARGS_SLOT, 1), name_style, args_style
        return template, name_style, ""
    return None


def args_text(arguments: dict[str, Any], style: str) -> str:
    return json.dumps(arguments, sort_keys=style == "sorted") if style else ""


def labels_of(history: list[Message]) -> list[str]:
    return [label_of(m) for m in history if m.role == "assistant"]


@dataclass
class Conventions:
    writes: set[str] = field(default_factory=set)
    texts: dict[str, str] = field(default_factory=dict)  # reply label -> its most common text
    slots: dict[str, str] = field(default_factory=dict)  # reply label -> the text before a list of values
    closing: str = "say:goodbye"
    requests: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # label -> template, styles
    arg_requests: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # the same, of calls with arguments
    asked_args: dict[str, dict[str, Any]] = field(default_factory=dict)  # asked call -> its usual arguments


def read_conventions(trajectories: list[Trajectory]) -> Conventions:
    out = Conventions()
    texts: dict[str, Counter] = {}
    last: Counter = Counter()
    for traj in trajectories:
        last.update(label_of(m) for m in traj.messages[-2:] if m.role == "assistant" and not m.tool_calls)
        prev = ""
        for m in traj.messages:
            if m.role != "assistant":
                continue
            label = label_of(m)
            if label.startswith("tool:") and prev == "say:confirm":
                out.writes.add(label[5:])
            elif not label.startswith("tool:") and label != "say:confirm":
                texts.setdefault(label, Counter())[m.content or ""] += 1
            prev = label
    templates: dict[str, Counter] = {}
    args: dict[str, Counter] = {}
    for traj in trajectories:
        for i, m in enumerate(traj.messages):
            call = asked_call(traj.messages, i) if m.role == "assistant" and m.content else None
            found = request_template(m.content, call) if call is not None else None
            if found is not None:
                templates.setdefault(label_of(m), Counter())[found] += 1
                args.setdefault(call.name, Counter())[json.dumps(call.arguments, sort_keys=True)] += 1
    out.requests = {label: c.most_common(1)[0][0] for label, c in templates.items()}
    for label, c in templates.items():
        with_args = [t for t, _ in c.most_common() if t[2]]
        if with_args:
            out.arg_requests[label] = with_args[0]
    out.asked_args = {name: json.loads(c.most_common(1)[0][0]) for name, c in args.items()}
    if last:
        out.closing = last.most_common(1)[0][0]
    for label, counter in texts.items():
        out.texts[label] = counter.most_common(1)[0][0]
        heads = Counter(t.rsplit(": ", 1)[0] + ": " for t in counter.elements() if ": " in t)
        if heads:
            head, n = heads.most_common(1)[0]
            tails = {t[len(head):] for t in counter if t.startswith(head)}
            if len(tails) > 1 and n >= 0.2 * sum(counter.values()):
                out.slots[label] = head
                plain = [(c, t) for t, c in counter.items() if not t.startswith(head)]
                if plain:
                    out.texts[label] = max(plain)[1]
    return out
