"""Dialogue-state tracking for the embedded learner, from agent-visible material only.

A user's message can carry several requests ("first ...; then ...; then ...").
The tracker splits the user's messages into request clauses and follows which
one the agent is working on: the pointer moves to a later clause when a tool
call uses one of that clause's ids (reservation ids, flight numbers, or for a
clause without ids, its airports and dates), and past the current clause as
soon as a write has been made for it. Nothing here reads the task, the gold actions or the
database; it reads what the user said and which calls the agent made.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from storage.records import Message

WRITE_PREFIXES = ("book", "cancel", "update", "send", "modify", "return", "exchange")
SPLIT = re.compile(r";|\bthen\b|\.\s", re.I)
NAME = re.compile(r"\b([A-Z][a-z]+) ([A-Z][a-z]+)\b")
ALPHA = re.compile(r"[a-z]+")
PATTERNS = {  # the values an agent can pick out of what the user says
    "user_id": re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b"),
    "payment_id": re.compile(r"\b(?:credit_card|gift_card|certificate)_\d+\b"),
    "reservation_id": re.compile(r"\b[A-Z0-9]{6}\b"),
    "flight_number": re.compile(r"\bHAT\d{3}\b"),
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "airport": re.compile(r"\b[A-Z]{3}\b"),
    "cabin": re.compile(r"\b(basic economy|economy|business)\b", re.I),
    "number": re.compile(r"(?<![\w.-])\d{1,5}(?![\w-])"),
}
IDS = {k: PATTERNS[k] for k in ("flight_number", "airport", "date", "payment_id")}
IDS["reservation_id"] = re.compile(r"\b(?!HAT\d{3}\b)[A-Z0-9]{6}\b")  # six characters, but not a flight
STOP = {"i", "would", "like", "to", "first", "the", "of", "a", "an", "on", "with", "for", "my", "is", "and", "me",
        "please", "this", "that", "it", "be", "in", "at", "hat", "pay", "card", "credit", "gift"}


def is_write(name: str) -> bool:
    return name.startswith(WRITE_PREFIXES)


def written_values(history: list[Message]) -> set[str]:
    """Every argument value of the writes made so far."""
    return {str(v) for m in history for c in m.tool_calls if is_write(c.name) for v in flat(c.arguments)}


def flat(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in flat(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in flat(v)]
    return [obj]


@dataclass
class Clause:
    text: str
    values: dict[str, list[str]]
    words: list[str]
    names: list[tuple[str, str]]

    @property
    def keys(self) -> set[str]:
        """The values whose use in a call shows the agent is working on this clause."""
        rids = self.values.get("reservation_id", [])
        return set(rids or [v for k in ("flight_number", "airport", "date") for v in self.values.get(k, [])])


@dataclass
class Dialogue:
    clauses: list[Clause]
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

    def relation(self, clause: int | None) -> str:
        if clause is None:
            return "none"
        d = clause - self.pointer
        return {0: "cur", 1: "next", -1: "prev"}.get(d, "after" if d > 0 else "before")


def clauses_of(text: str) -> list[Clause]:
    out = []
    for part in SPLIT.split(text):
        values = {k: pat.findall(part) for k, pat in IDS.items()}
        values = {k: v for k, v in values.items() if v}
        if not any(k in values for k in ("flight_number", "reservation_id", "airport", "date")):
            continue
        words = [w for w in ALPHA.findall(part.lower()) if w not in STOP]
        out.append(Clause(part.strip(), values, words, NAME.findall(part)))
    return out


def track(history: list[Message]) -> Dialogue:
    dlg = Dialogue([])
    for m in history:
        if m.role == "user" and m.content:
            dlg.clauses.extend(clauses_of(m.content))
        for call in m.tool_calls:
            used = {str(v) for v in flat(call.arguments)}
            ahead = [j for j, c in enumerate(dlg.clauses) if j >= dlg.pointer and c.keys & used]
            if ahead and ahead[0] != dlg.pointer:
                dlg.pointer, dlg.calls = ahead[0], 0
            dlg.calls += 1
            dlg.wrote = is_write(call.name)
            if dlg.wrote:  # a write completes its request: what comes next is about the next one
                dlg.pointer, dlg.calls = dlg.pointer + 1, 0
        dlg.clause_of_msg.append(dlg.pointer)
    return dlg


def mention_clause(dlg: Dialogue, kind: str, value: str) -> int | None:
    """The first clause, from the current one on, that mentions the value (else the last that does)."""
    hits = [j for j, c in enumerate(dlg.clauses) if value in c.values.get(kind, [])]
    later = [j for j in hits if j >= dlg.pointer]
    return later[0] if later else (hits[-1] if hits else None)


def observations(history: list[Message]) -> list[tuple[int, str, Any]]:
    """(message index, producing tool, parsed JSON or text) of every successful tool observation."""
    out, last_call = [], ""
    for i, m in enumerate(history):
        if m.tool_calls:
            last_call = m.tool_calls[0].name
        elif m.role == "tool" and m.content and not m.error:
            try:
                data = json.loads(m.content)
            except ValueError:
                data = m.content.strip()
            out.append((i, last_call, data))
    return out


def people(obs: list[tuple[int, str, Any]]) -> dict[str, dict[str, str]]:
    """Every person the profile shows (the user and saved passengers), by "First Last"."""
    out: dict[str, dict[str, str]] = {}
    for _, tool, data in obs:
        if tool != "get_user_details" or not isinstance(data, dict):
            continue
        name = data.get("name") or {}
        if name.get("first_name") and data.get("dob"):
            out[f"{name['first_name']} {name['last_name']}"] = {
                "first_name": name["first_name"], "last_name": name["last_name"], "dob": data["dob"]}
        for p in data.get("saved_passengers") or []:
            out[f"{p['first_name']} {p['last_name']}"] = {k: p[k] for k in ("first_name", "last_name", "dob")}
    return out


def reservation_for(obs: list[tuple[int, str, Any]], clause: Clause | None) -> dict | None:
    """The latest reservation details of a reservation the clause names."""
    if clause is None:
        return None
    rids = set(clause.values.get("reservation_id", []))
    for _, tool, data in reversed(obs):
        if isinstance(data, dict) and data.get("reservation_id") in rids and "flights" in data:
            return data
    return None


def composites(history: list[Message], dlg: Dialogue) -> list[tuple[str, Any]]:
    """Structured argument values assembled from the current clause and the observations.

    Each is (how it was assembled, value); the learner scores them like any other candidate.
    """
    cur, obs = dlg.current, observations(history)
    if cur is None:
        return []
    out: list[tuple[str, Any]] = []
    persons = people(obs)
    named = [persons[f"{a} {b}"] for a, b in cur.names if f"{a} {b}" in persons]
    if named:
        out.append(("named_passengers", named))
    dates, flights = cur.values.get("date", []), cur.values.get("flight_number", [])
    if flights and dates:
        out.append(("named_segment", [{"flight_number": flights[-1], "date": dates[-1]}]))
    res = reservation_for(obs, cur)
    if res is not None:
        segs = [{"flight_number": f["flight_number"], "date": f["date"]} for f in res.get("flights", [])]
        out.append(("reservation_segments", segs))
        if len(flights) >= 2 and len(dates) >= 2:
            swapped = [({"flight_number": flights[1], "date": dates[1]}
                        if s == {"flight_number": flights[0], "date": dates[0]} else s) for s in segs]
            out.append(("swapped_segments", swapped))
        pax = [{k: p[k] for k in ("first_name", "last_name", "dob")} for p in res.get("passengers", [])]
        if len(cur.names) >= 2 and dates:
            (old_f, old_l), (new_f, new_l) = cur.names[0], cur.names[1]
            replaced = [({"first_name": new_f, "last_name": new_l, "dob": dates[-1]}
                         if (p["first_name"], p["last_name"]) == (old_f, old_l) else p) for p in pax]
            out.append(("replaced_passengers", replaced))
        n = len(pax)
        for k in range(5):  # a free allowance of k bags per passenger
            for add in _small_numbers(cur.text):
                total = res.get("total_baggages", 0) + add
                out.append((f"nonfree_k{k}", max(res.get("nonfree_baggages", 0), total - k * n)))
    search = next((d for _, t, d in reversed(obs) if t == "search_direct_flight" and isinstance(d, list)), None)
    pays = cur.values.get("payment_id", [])
    if search and pays:
        n = max(len(named), 1)
        for f in search:
            if isinstance(f, dict) and f.get("flight_number") in flights:
                for cabin, price in (f.get("prices") or {}).items():
                    out.append((f"payment_{cabin}", [{"payment_id": pays[-1], "amount": price * n}]))
    return out


def _small_numbers(text: str) -> list[int]:
    return sorted({int(x) for x in re.findall(r"(?<![\w.-])\d(?![\w-])", text)}) or [0]
