"""Dialogue-state tracking for the embedded learner, from agent-visible material only.

Nothing here knows a domain. A value is whatever the user writes that looks
like data rather than prose: a token with a digit, an underscore or an ``@``,
an all-capitals code, a number, or a pair of capitalized words (a name). A
user's message can carry several requests ("first ...; then ..."): the tracker
splits it into request clauses (sentences of self-identification, "my ... is
X" / "it is X", are kept apart as identity values) and follows which clause the
agent works on: the pointer moves to a later clause when a call uses one of that
clause's values, and past the current one once a write was made for it. Which
tools write is learned from the data (the tools an agent asked to confirm).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from evosyn.storage.records import Message

SPLIT = re.compile(r";|\bthen\b|\.\s|\?\s")
TOKEN = re.compile(r"#?[A-Za-z0-9][\w.@+-]*[A-Za-z0-9]|#?[A-Za-z0-9]")  # a leading "#" is part of a code
RUN = re.compile(r"(?:\b(?:[A-Z][\w.-]*|\d[\w-]*)(?: |$))+")  # capitalized or digit-led words in a row
NAME = re.compile(r"\b([A-Z][a-z]+) ([A-Z][a-z]+)\b")
SELF = re.compile(r"\b(?:(?:my\b[\w ]{0,30}?|it) is|i am)\s*$", re.IGNORECASE)  # "my customer id is", "it is", "I am"
ALPHA = re.compile(r"[a-z]+")
STOP = {"i", "would", "like", "to", "first", "the", "of", "a", "an", "on", "with", "for", "my", "is", "and", "me",
        "please", "this", "that", "it", "be", "in", "at", "also", "one", "more", "thing", "yes"}


def shape(value: Any) -> str:
    """A coarse character-class signature: which classes occur, and the length."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "num"
    if not isinstance(value, str):
        return type(value).__name__
    classes = "".join(sorted({"U" if c.isupper() else "l" if c.islower() else "9" if c.isdigit() else "_"
                              for c in value}))
    return f"{classes}:{min(len(value), 16)}"


def coarse(value: Any) -> str:
    """num, code (letters and digits only) or sep (with separators): what a value is, before its length."""
    if isinstance(value, (int, float)):
        return "num"
    return "code" if str(value).isalnum() else "sep"


def is_value(tok: str) -> bool:
    return (any(c.isdigit() for c in tok) or "_" in tok or "@" in tok
            or (len(tok) >= 2 and tok.isupper() and tok.isalnum()))


@dataclass
class Mention:
    """A value the user wrote: where, how it looked, and the words just before it."""

    value: Any
    text: str
    msg: int
    pos: int
    before: list[str]
    kind: str  # coarse shape plus the word before it, e.g. "code|number"
    is_name: bool = False


def mentions_in(text: str, msg: int = 0) -> list[Mention]:
    out = []
    for m in TOKEN.finditer(text):
        tok = m.group()
        if not is_value(tok):
            continue
        value: Any = int(tok) if tok.isdigit() and len(tok) <= 6 and not (tok[0] == "0" and len(tok) > 1) else tok
        before = ALPHA.findall(text[max(0, m.start() - 40):m.start()].lower())[-2:]
        out.append(Mention(value, tok, msg, m.start(), before, f"{coarse(value)}|{before[-1] if before else ''}"))
    for m in NAME.finditer(text):
        before = ALPHA.findall(text[max(0, m.start() - 40):m.start()].lower())[-2:]
        out.append(Mention(m.group(), m.group(), msg, m.start(), before, "name", is_name=True))
    return sorted(out, key=lambda x: x.pos)


def flat(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in flat(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in flat(v)]
    return [obj]


def call_values(history: list[Message], writes: set[str] | None = None) -> set[str]:
    """Every scalar argument value of the calls so far (of the writes only, when ``writes`` is given)."""
    return {str(v) for m in history for c in m.tool_calls if writes is None or c.name in writes
            for v in flat(c.arguments)}


@dataclass
class Clause:
    text: str
    mentions: list[Mention]
    words: list[str]
    phrases: list[str] = field(default_factory=list)  # in a comma-separated list: its capitalized/numeric runs

    @property
    def keys(self) -> set[str]:
        """The values whose use in a call shows the agent is working on this clause."""
        return {str(m.value) for m in self.mentions if not m.is_name and not isinstance(m.value, int)}

    def names(self) -> list[str]:
        return [m.value for m in self.mentions if m.is_name]


@dataclass
class Dialogue:
    clauses: list[Clause]
    identity: list[Mention] = field(default_factory=list)  # values the user gave about themselves
    pointer: int = 0
    wrote: bool = False  # the last call was a write (which moved the pointer past its clause)
    calls: int = 0  # calls made since the pointer reached the current clause
    clause_of_msg: list[int] = field(default_factory=list)  # the pointer when each message was added

    @property
    def current(self) -> Clause | None:
        return self.clauses[self.pointer] if self.pointer < len(self.clauses) else None

    @property
    def next(self) -> Clause | None:
        return self.clauses[self.pointer + 1] if self.pointer + 1 < len(self.clauses) else None

    def relation(self, clause: int | None, to: int | None = None) -> str:
        if clause is None:
            return "none"
        d = clause - (self.pointer if to is None else to)
        return {0: "cur", 1: "next", -1: "prev"}.get(d, "after" if d > 0 else "before")

    def open_clause(self, used: set[str]) -> int:
        """The first clause from the pointer on with a value no call has used yet."""
        return next((j for j in range(self.pointer, len(self.clauses)) if self.clauses[j].keys - used),
                    len(self.clauses))

    def clause_of(self, value: Any) -> int | None:
        """The first clause, from the current one on, that mentions the value (else the last that does)."""
        hits = [j for j, c in enumerate(self.clauses) if any(m.value == value for m in c.mentions)]
        later = [j for j in hits if j >= self.pointer]
        return later[0] if later else (hits[-1] if hits else None)


def phrases_in(part: str, values: set[str]) -> list[str]:
    """The runs of capitalized or digit-led words of each comma-separated segment ("360 Pine Lane, Suite 1,
    Springfield"): a multi-word value the user wrote as one item of a list (none outside such lists)."""
    if "," not in part:
        return []
    out = []
    for segment in part.split(","):
        for m in RUN.finditer(segment.strip() + " "):
            run = m.group().strip()
            if run and not any(run in v for v in values) and run not in out:
                out.append(run)
    return out


def split_message(text: str, msg: int) -> tuple[list[Clause], list[Mention]]:
    clauses, identity = _split(text, msg)
    return list(clauses), list(identity)


@lru_cache(maxsize=4096)
def _split(text: str, msg: int) -> tuple[tuple[Clause, ...], tuple[Mention, ...]]:
    """``split_message``, once per message: every later decision of a conversation re-reads it (the clauses
    and mentions are never changed after)."""
    clauses, identity, start = [], [], 0
    parts = []
    for m in SPLIT.finditer(text + " "):
        parts.append((start, text[start:m.start()]))
        start = m.end()
    parts.append((start, text[start:]))
    for offset, part in parts:
        found = [Mention(x.value, x.text, msg, x.pos + offset, x.before, x.kind, x.is_name)
                 for x in mentions_in(part)]
        if not found:
            continue
        if SELF.search(part[:found[0].pos - offset]):  # "my name is A B and my zip code is 12345"
            identity.extend(found)
            continue
        words = [w for w in ALPHA.findall(part.lower()) if w not in STOP]
        clauses.append(Clause(part.strip(), found, words, phrases_in(part, {x.text for x in found})))
    return tuple(clauses), tuple(identity)


def track(history: list[Message], writes: set[str]) -> Dialogue:
    dlg = Dialogue([])
    for i, m in enumerate(history):
        if m.role == "user" and m.content:
            clauses, identity = _split(m.content, i)
            dlg.clauses.extend(clauses)
            dlg.identity.extend(identity)
        for call in m.tool_calls:
            used = {str(v) for v in flat(call.arguments)}
            ahead = [j for j, c in enumerate(dlg.clauses) if j >= dlg.pointer and c.keys & used]
            if ahead and ahead[0] != dlg.pointer:
                dlg.pointer, dlg.calls = ahead[0], 0
            dlg.calls += 1
            dlg.wrote = call.name in writes
            if dlg.wrote:  # a write completes its request: what comes next is about the next one
                dlg.pointer, dlg.calls = dlg.pointer + 1, 0
        dlg.clause_of_msg.append(dlg.pointer)
    return dlg
