"""What the embedded learner sees, turned into features: the state, and argument candidates.

Only agent-visible material is used: user and assistant messages, tool
observations and the tool schemas. Candidates for an argument are values that
appear in that material (ids, dates, numbers, JSON fields of observations) plus
small arithmetic on numbers seen there; the learner picks among them.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agents.learners.dialogue import (PATTERNS, Dialogue, composites, flat, mention_clause, observations,
                                      reservation_for, track, written_values)
from storage.records import Message

WORD = re.compile(r"[a-z0-9_\-]+")


def label_of(msg: Message) -> str:
    if msg.tool_calls:
        return f"tool:{msg.tool_calls[0].name}"
    text = (msg.content or "").lower()
    if "user id" in text and "?" in text:
        return "say:ask_id"
    if "confirm" in text:
        return "say:confirm"
    if "sorry" in text or "cannot" in text:
        return "say:refuse"
    if "anything else" in text:
        return "say:ack"
    return "say:close"


MENTION_KINDS = ("flight_number", "reservation_id", "payment_id", "user_id", "date", "airport")


def mentions(history: list[Message]) -> list[tuple[str, str, str]]:
    """(kind, value, the two words before it) for every entity the user mentioned, in order."""
    out = []
    for n, m in enumerate(history):
        if m.role != "user" or not m.content:
            continue
        for kind in MENTION_KINDS:
            for match in PATTERNS[kind].finditer(m.content):
                if kind == "reservation_id" and PATTERNS["flight_number"].fullmatch(match.group()):
                    continue
                before = WORD.findall(m.content[max(0, match.start() - 40):match.start()].lower())[-2:]
                out.append(((n, match.start()), kind, match.group(), " ".join(before)))
    out.sort()  # in the order the user said them
    return [(k, v, b) for _, k, v, b in out]


def used_values(history: list[Message]) -> set[str]:
    return {str(v) for m in history for c in m.tool_calls for v in flat(c.arguments)}


def dialogue_tokens(history: list[Message], dlg: Dialogue) -> list[str]:
    """Where the agent is in the user's list of requests, and what the current and next ones ask for."""
    cur, nxt = dlg.current, dlg.next
    labels = [label_of(m) for m in history if m.role == "assistant"]
    prev = labels[-1] if labels else "none"
    knows = f"ud={'tool:get_user_details' in labels}"
    if cur is None:
        return ["cur_none", f"cur_none|prev_{prev}", f"cur_none|{len(dlg.clauses) > 0}"]
    status = f"open{min(dlg.calls, 3)}" + ("w" if dlg.wrote else "")
    toks = [f"cur_{status}", f"cur_first_{dlg.pointer == 0}", f"has_next_{nxt is not None}", knows,
            f"{status}|prev_{prev}", f"{status}|{knows}"]
    for w in cur.words:
        toks += [f"cw_{w}", f"cw_{w}|{status}", f"cw_{w}|prev_{prev}", f"cw_{w}|{knows}", f"cw_{w}|{status}|{knows}"]
    toks += [f"nw_{w}" for w in nxt.words] if nxt is not None else ["nw_none"]
    return toks


def context_values(history: list[Message], dlg: Dialogue) -> dict[str, str]:
    """A few facts the observations show about the current request (membership, cabin)."""
    obs = observations(history)
    out = {}
    user = next((d for _, t, d in reversed(obs) if t == "get_user_details" and isinstance(d, dict)), None)
    if user:
        out["membership"] = str(user.get("membership"))
    res = reservation_for(obs, dlg.current)
    if res:
        out["cabin"] = str(res.get("cabin"))
        out["insurance"] = str(res.get("insurance"))
    return out


def state_tokens(history: list[Message], scene: "Scene | None" = None) -> str:
    scene = scene or Scene.of(history)
    dlg = scene.dlg
    toks: list[str] = dialogue_tokens(history, dlg)
    used = used_values(history)
    pending = [(k, v, b) for k, v, b in mentions(history) if v not in used and k in ("flight_number", "reservation_id")]
    if pending:
        kind, _, before = pending[0]
        toks += [f"next_{kind}"] + [f"next_{kind}_{w}" for w in before.split()]
    else:
        toks.append("next_none")
    # the earliest request the agent has not acted on with a write yet, and the words that ask for it
    written = written_values(history)
    todo = [(k, b) for k, v, b in mentions(history) if v not in written and k in ("flight_number", "reservation_id")]
    if todo:
        toks += [f"nextw_{todo[0][0]}"] + [f"nextw_{w}" for w in todo[0][1].split()]
    users = [m for m in history if m.role == "user" and m.content]
    if users:
        toks += [f"f_{w}" for w in WORD.findall(users[0].content.lower())]
        toks += [f"u_{w}" for w in WORD.findall(users[-1].content.lower())]
    last = history[-1] if history else None
    if last is not None:
        toks.append(f"last_role_{last.role}")
        if last.role == "tool":
            toks.append("last_error" if last.error else "last_ok")
    labels = [label_of(m) for m in history if m.role == "assistant"]
    toks += [f"did_{lab}" for lab in labels]
    if labels:
        toks.append(f"prev_{labels[-1]}")
        toks.append(f"prev2_{'|'.join(labels[-2:])}")
    writes = sum(1 for lab in labels if lab.startswith("tool:") and any(
        w in lab for w in ("book", "cancel", "update", "send", "modify", "return", "exchange")))
    toks.append(f"writes_{min(writes, 6)}")
    toks.append(f"steps_{min(len(labels), 30) // 3}")
    toks += [f"ctx_{k}={v}" for k, v in scene.context.items()]
    if any(PATTERNS["user_id"].search((m.content or "")) for m in users):
        toks.append("knows_user_id")
    return " ".join(toks)


@dataclass
class Candidate:
    value: Any
    source: str  # user / obs / derived / composite / schema
    key: str  # the JSON key it appeared under, the regex kind, or how it was assembled
    age: int  # messages since it appeared
    in_last_user: bool
    rank: int | None = None  # order among the user's mentions of this kind
    first_unused: bool = False  # the earliest mention of its kind not yet used in a call
    first_unwritten: bool = False  # the earliest mention of its kind no write has acted on yet
    msg: int = -1  # the message it came from
    tool: str = ""  # for observations: the tool that produced it
    clause: int | None = None  # for the user's values: the request clause that mentions it


@dataclass
class Scene:
    """What every candidate of one decision is scored against: the tracked dialogue and its context."""

    dlg: Dialogue
    text: str  # the current request clause, normalized
    words: list[str]
    context: dict[str, str]

    @staticmethod
    def of(history: list[Message], dlg: Dialogue | None = None) -> "Scene":
        dlg = dlg or track(history)
        cur = dlg.current
        return Scene(dlg, _norm(cur.text) if cur else "", cur.words if cur else [], context_values(history, dlg))


def _norm(text: str) -> str:
    return " " + re.sub(r"[^a-z0-9]+", " ", text.lower()) + " "


def _walk(obj: Any, key: str = "") -> list[tuple[str, Any]]:
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_walk(v, k))
            if isinstance(v, (list, dict)) and k in ("flights", "passengers"):
                out.append((k, v))
    elif isinstance(obj, list):
        for v in obj:
            out.extend(_walk(v, key))
    else:
        out.append((key, obj))
    return out


def candidates(history: list[Message], dlg: Dialogue | None = None) -> list[Candidate]:
    dlg = dlg or track(history)
    out: list[Candidate] = []
    last_user = max((i for i, m in enumerate(history) if m.role == "user"), default=-1)
    n = len(history)
    for i, m in enumerate(history):
        age = n - i
        if m.role == "user" and m.content:
            for kind, pat in PATTERNS.items():
                for v in pat.findall(m.content):
                    value = int(v) if kind == "number" else (v.lower().replace(" ", "_") if kind == "cabin" else v)
                    out.append(Candidate(value, "user", kind, age, i == last_user, msg=i,
                                         clause=mention_clause(dlg, kind, v)))
    for i, tool, data in observations(history):
        if isinstance(data, str):
            out.append(Candidate(data, "obs", "text", n - i, False, msg=i, tool=tool))
            out += [Candidate(int(x), "obs", "text_number", n - i, False, msg=i, tool=tool)
                    for x in re.findall(r"(?<![\w.])\d+(?!\w)", data)]
            continue
        for key, value in _walk(data):
            if isinstance(value, list) and key == "flights":
                value = [{"flight_number": f.get("flight_number"), "date": f.get("date")}
                         for f in value if isinstance(f, dict)]
            out.append(Candidate(value, "obs", key, n - i, False, msg=i, tool=tool))
    order: dict[str, list[str]] = {}
    for kind, value, _ in mentions(history):
        if value not in order.setdefault(kind, []):
            order[kind].append(value)
    used = used_values(history)
    written = written_values(history)
    for c in out:
        if c.source == "user" and c.key in order and str(c.value) in order[c.key]:
            c.rank = order[c.key].index(str(c.value))
            c.first_unused = next((v for v in order[c.key] if v not in used), None) == str(c.value)
            c.first_unwritten = next((v for v in order[c.key] if v not in written), None) == str(c.value)
    # the most recent occurrence of each (value, key, source) is enough
    seen: dict[tuple[str, str, str], Candidate] = {}
    for c in out:
        seen[(json.dumps(c.value, sort_keys=True), c.key, c.source)] = c
    out = list(seen.values())

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    derived: list[Candidate] = []
    user_numbers = sorted({c.value for c in out if c.source == "user" and is_int(c.value) and 0 < c.value < 10})
    for c in out:
        if c.source == "obs" and is_int(c.value) and c.value < 20:
            derived += [Candidate(c.value + u, "derived", f"{c.key}+user", c.age, False, msg=c.msg, tool=c.tool)
                        for u in user_numbers]
        if c.source == "obs" and isinstance(c.value, list) and c.key == "passengers":
            k = len(c.value)
            derived += [Candidate(k * f, "derived", name, c.age, False, msg=c.msg, tool=c.tool)
                        for f, name in ((1, "count:passengers"), (50, "x50:passengers"), (100, "x100:passengers"))]
    for v in sorted({c.value for c in out if is_int(c.value) and c.value < 10}):
        derived += [Candidate(v + 1, "derived", "+1", 0, False), Candidate(v + 2, "derived", "+2", 0, False)]
    derived += [Candidate(value, "composite", how, 0, False) for how, value in composites(history, dlg)]
    out.extend(derived)
    return out


def candidate_features(tool: str, arg: str, c: Candidate, used: set[str], scene: Scene | None = None) -> list[str]:
    kind = "int" if isinstance(c.value, int) and not isinstance(c.value, bool) else type(c.value).__name__
    base = [f"src={c.source}", f"key={c.key}", f"kind={kind}", f"age={min(c.age, 12)}"]
    feats = base + [f"arg={arg}|{b}" for b in base] + [f"tool={tool}|arg={arg}|key={c.key}"]
    if c.key == arg or arg.endswith(c.key) or c.key.endswith(arg):
        feats.append("key_matches_arg")
    if c.in_last_user:
        feats += ["in_last_user", f"arg={arg}|in_last_user"]
    if c.rank is not None:
        feats += [f"rank={min(c.rank, 4)}", f"arg={arg}|rank={min(c.rank, 4)}",
                  f"tool={tool}|arg={arg}|rank={min(c.rank, 4)}"]
    if c.first_unused:
        feats += ["first_unused", f"arg={arg}|first_unused", f"tool={tool}|arg={arg}|first_unused"]
    if c.first_unwritten:
        feats += ["first_unwritten", f"arg={arg}|first_unwritten", f"tool={tool}|arg={arg}|first_unwritten"]
    if json.dumps(c.value, sort_keys=True) in used:
        feats += ["used_before", f"arg={arg}|used_before"]
    if scene is None:
        return feats
    dlg = scene.dlg
    if c.source == "user":
        rel = dlg.relation(c.clause)
        feats += [f"rel={rel}", f"arg={arg}|rel={rel}", f"tool={tool}|arg={arg}|key={c.key}|rel={rel}"]
    if c.tool:
        here = 0 <= c.msg < len(dlg.clause_of_msg) and dlg.clause_of_msg[c.msg] == dlg.pointer
        feats += [f"arg={arg}|obs_tool={c.tool}|key={c.key}", f"arg={arg}|obs_cur={here}",
                  f"tool={tool}|arg={arg}|obs_tool={c.tool}|obs_cur={here}"]
    if isinstance(c.value, (str, int)) and not isinstance(c.value, bool) and scene.text:
        in_text = _norm(str(c.value)) in scene.text
        feats += [f"arg={arg}|in_cur_text={in_text}", f"tool={tool}|arg={arg}|src={c.source}|in_cur_text={in_text}"]
    if c.source in ("derived", "composite"):
        feats += [f"arg={arg}|key={c.key}|cw_{w}" for w in scene.words]
        feats += [f"arg={arg}|key={c.key}|{k}={v}" for k, v in scene.context.items()]
        feats += [f"arg={arg}|key={c.key}|" + "|".join(f"{k}={v}" for k, v in sorted(scene.context.items()))]
    return feats


def schema_candidates(arg_schema: dict[str, Any]) -> list[Candidate]:
    """Values the tool schema itself offers: enum members, and small counts for integers."""
    out = [Candidate(v, "schema", "enum", 0, False) for v in arg_schema.get("enum", [])]
    for ref in arg_schema.get("anyOf", []) + arg_schema.get("allOf", []):
        out += [Candidate(v, "schema", "enum", 0, False) for v in ref.get("enum", [])]
    if arg_schema.get("type") == "integer":
        out += [Candidate(v, "schema", "small_int", 0, False) for v in (0, 1, 2, 3)]
    return out
