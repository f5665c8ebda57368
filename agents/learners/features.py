"""What the embedded learner sees, turned into features: the state, and argument candidates.

Only agent-visible material is used: user and assistant messages, tool
observations (JSON values by path), the values the system prompt states
(``prompt.stated_values``) and the tool schemas. Nothing here names a
domain, a tool or a field: a candidate is a value the user wrote, a value an
observation showed, a schema enum member, or a small arithmetic composite of
numbers in the context (a sum, a difference, a product with a count, or a
constant learned from the training data times a count), and for arguments
that are lists of objects, lists read from observations, lists with one value
replaced by one the user wrote, the records the user named, or one object
assembled field by field. The learner's ranker picks among them; which
arithmetic an argument needs is what it learns.
"""
from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from typing import Any

from evosyn.agents.learners.dialogue import (
    ALPHA,
    STOP,
    Clause,
    Dialogue,
    Mention,
    call_values,
    is_value,
    track,
)
from evosyn.storage.records import Message

WORD = re.compile(r"[a-z0-9_\-]+")
ENUMISH = re.compile(r"^[a-z][a-z_ ]{0,24}$")
MAX_FOCUS_NUMBERS = 24  # operands of the composites: the newest numbers of the records in focus
MAX_FACTS = 24
SCENES = itertools.count()
MAX_NAMED = 2  # a value the user wrote puts in focus the records holding it, if one observation has at most this many


def norm(text: str) -> str:
    return " " + re.sub(r"[^a-z0-9]+", " ", str(text).lower()) + " "


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass
class Candidate:
    value: Any
    source: str  # user / identity / obs / list / composite / schema / assembled
    key: str  # the JSON key, the user's word before it, or how it was assembled
    age: int = 0  # messages since it appeared
    path: str = ""  # JSON path in the observation (list indices and id-like keys dropped)
    tool: str = ""  # for observations: the tool that produced it
    msg: int = -1
    kind: str = ""  # shape|word-before for the user's values
    clause: int | None = None  # for the user's values: the request clause that mentions it
    rank: int | None = None  # rank among the user's values of its kind
    first_unused: bool = False
    first_unwritten: bool = False
    in_last_user: bool = False
    focus: bool = False  # from a record the current request names
    extra: list[str] = field(default_factory=list)  # features of how a composite or list was built
    within: tuple[int, ...] = ()  # for observed values: the records (indices) that hold it
    match: str = ""  # for observed values: how well its own record matches the current request's words

    def but(self, value: Any, tag: str) -> Candidate:
        """``dataclasses.replace(self, value=value, extra=self.extra + [tag])`` without re-running ``__init__``
        (a decision makes thousands of these); what the candidate remembered of its scene is not copied."""
        new = object.__new__(Candidate)
        new.__dict__.update(self.__dict__, value=value, extra=self.extra + [tag])
        new.__dict__.pop("_profile", None)
        return new


_DEFAULTS = {f.name: f.default for f in fields(Candidate) if f.default is not MISSING}


def _observed(value: Any, source: str, key: str, path: str, tool: str, msg: int, within: tuple[int, ...]) -> Candidate:
    """``Candidate(value, source, key, path=path, tool=tool, msg=msg, within=within)``, without running the
    dataclass ``__init__`` (every decision makes one per value its observations hold)."""
    c = object.__new__(Candidate)
    c.__dict__.update(_DEFAULTS, value=value, source=source, key=key, path=path, tool=tool, msg=msg, within=within,
                      extra=[])
    return c


@dataclass
class Record:
    """One JSON object of an observation, with its own and its nested objects' scalar fields."""

    path: str
    tool: str
    msg: int
    fields: dict[str, Any]
    lists: dict[str, list]
    strs: frozenset[str] = frozenset()  # its string values
    focus: bool = False


@lru_cache(maxsize=65536)
def _key(k: str) -> str:
    return "*" if is_value(k) else k


@lru_cache(maxsize=8192)
def _walk(content: str) -> tuple[tuple, tuple, tuple]:
    """One observation's objects, scalar leaves and lists of objects (cached: every later decision re-reads it).

    Leaves and lists carry the indices of the objects around them, so that a value is in focus
    when any object around it is.
    """
    try:
        data = json.loads(content)
    except ValueError:
        return (), ((content.strip(), "text", "", ()),), ()
    records, leaves, lists = [], [], []

    def walk(obj: Any, path: str, key: str, within: tuple[int, ...]) -> None:
        if isinstance(obj, dict):
            fields, sub = {}, {}
            here = len(records)
            records.append((path, fields, sub))
            for k, v in obj.items():
                if isinstance(v, dict):
                    fields.update({kk: vv for kk, vv in v.items() if not isinstance(vv, (dict, list))})
                elif isinstance(v, list):
                    sub[k] = v
                else:
                    fields[k] = v
                walk(v, f"{path}.{_key(k)}" if path else _key(k), k, within + (here,))
        elif isinstance(obj, list):
            for v in obj:
                walk(v, path, key, within)
            if obj and all(isinstance(v, dict) for v in obj):
                lists.append((obj, key, path, within))
        elif obj is not None:
            leaves.append((obj, key, path, within))

    walk(data, "", "", ())
    records = [(p, f, sub, frozenset(str(v) for v in f.values() if isinstance(v, str))) for p, f, sub in records]
    return tuple(records), tuple(leaves), tuple(lists)


def _records(history: list[Message], stated: str = "") -> tuple[list[Record], list[Candidate], list[Candidate]]:
    """Every object (as a record), scalar leaf and list of objects of the successful observations; first those
    of ``stated`` (``prompt.stated_values`` of the system prompt: an observation before the first message)."""
    records: list[Record] = []
    leaves, lists = [], []
    if stated:
        recs, lvs, lsts = _walk(stated)
        records += [Record(p, "system", -1, f, sub, strs) for p, f, sub, strs in recs]
        leaves += [_observed(v, "obs", k, p, "system", -1, w) for v, k, p, w in lvs]
        lists += [_observed(v, "list", k, p, "system", -1, w) for v, k, p, w in lsts]
    last_call = ""
    for i, m in enumerate(history):
        if m.tool_calls:
            last_call = m.tool_calls[0].name
        if m.role != "tool" or not m.content or m.error:
            continue
        recs, lvs, lsts = _walk(m.content)
        base = len(records)
        records += [Record(p, last_call, i, f, sub, strs) for p, f, sub, strs in recs]
        leaves += [_observed(v, "obs", k, p, last_call, i, tuple(base + j for j in w)) for v, k, p, w in lvs]
        lists += [_observed(v, "list", k, p, last_call, i, tuple(base + j for j in w)) for v, k, p, w in lsts]
    return records, leaves, lists


def mentions_record(rec: Record, values: set[str], names: list[str]) -> bool:
    return bool(rec.strs & values) or any(n in rec.strs or set(n.split()) <= rec.strs for n in names)


@dataclass
class Scene:
    """Everything one decision's candidates are built from and scored against."""

    dlg: Dialogue
    text: str  # the current request clause, normalized
    words: list[str]
    n: int
    user: list[Candidate]
    leaves: list[Candidate]
    lists: list[Candidate]
    records: list[Record]
    counts: list[tuple[str, int]]  # small counts in focus: names in the request, lengths of lists
    facts: list[str]  # short word values of the records in focus (key=value)
    used: set[str]
    last_tool: str
    open: int = 0  # the first clause with a value not used yet (the pointer stays until a call moves it)
    said: tuple[str, ...] = ()  # the words of everything the user said, where the request gives none
    _by_value: dict[str, tuple[str, ...]] | None = field(default=None, repr=False, compare=False)
    serial: int = field(default_factory=lambda: next(SCENES), repr=False, compare=False)  # tells scenes apart

    def tuples(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``words`` and ``facts`` as tuples (parts of candidate profiles), made once."""
        known = self.__dict__.get("_tuples")
        if known is None:
            known = self.__dict__["_tuples"] = (tuple(self.words), tuple(self.facts))
        return known

    def fact_keys(self, value: str) -> tuple[str, ...]:
        """The keys under which the records in focus hold ``value``, as ``facts`` lists them."""
        if self._by_value is None:
            by: dict[str, list[str]] = {}
            for f in self.facts:
                k, v = f.split("=", 1)
                by.setdefault(v, []).append(k)
            self._by_value = {v: tuple(ks) for v, ks in by.items()}
        return self._by_value.get(value, ())

    @staticmethod
    def of(history: list[Message], writes: set[str], stated: str = "") -> Scene:
        """``stated``: the values the system prompt states (``prompt.stated_values``)."""
        dlg = track(history, writes)
        cur = dlg.current
        n = len(history)
        used = call_values(history)
        records, leaves, lists = _records(history, stated)
        facts, counts = _focus(records, dlg)
        for c in leaves + lists:
            c.age = n - c.msg
            c.focus = any(records[j].focus for j in c.within)
        everything = None if cur else " ".join(m.content or "" for m in history if m.role == "user")
        _match(leaves, records, cur.text if cur else everything)
        last_tool = next((m.tool_calls[0].name for m in reversed(history) if m.tool_calls), "")
        # the user's words stand in where the request has none (read only then: ``profiles``, learned objects)
        said = _said(history) if cur is None or not cur.words else ()
        if cur is not None:
            text, words = norm(cur.text), cur.words
        elif not dlg.clauses:  # requests that name no value: what the user said is the request
            text, words = norm(everything), list(said)
        else:
            text, words = "", []
        return Scene(dlg, text, words, n, _user_pool(history, dlg, used, call_values(history, writes)), leaves,
                     lists, records, counts, facts, used, last_tool, dlg.open_clause(used), said=said)


MAX_SAID = 48


def _said(history: list[Message]) -> tuple[str, ...]:
    """The distinct words of the user's messages, first said first (stop words out, at most ``MAX_SAID``)."""
    words = (w for m in history if m.role == "user" and m.content for w in ALPHA.findall(m.content.lower())
             if w not in STOP)
    return tuple(itertools.islice(dict.fromkeys(words), MAX_SAID))


def _match(leaves: list[Candidate], records: list[Record], text: str) -> None:
    """Rank each observed leaf's own record by the words of the request (else of all the user said) its string values hold, among the leaves of
    the same path and key: ``best`` (most words), and among the best the ``early``/``late`` one (its own words come
    first/last in the request: "change the A for the B")."""
    words = norm(text).split()
    if not words:
        return
    pos = {}
    for i, w in enumerate(words):
        pos.setdefault(w, i)
    by_path: dict[str, list[tuple[Candidate, int, float]]] = {}
    of_record: dict[int, tuple[int, float] | None] = {}  # a record's words in the request: once per record
    for c in leaves:
        if not c.within or not isinstance(c.value, str):
            continue
        j = c.within[-1]
        if j not in of_record:
            own = record_words(records[j].strs) & pos.keys()
            of_record[j] = (len(own), sum(pos[w] for w in own) / len(own)) if own else None
        if (found := of_record[j]) is not None:
            by_path.setdefault(f"{c.path}/{c.key}", []).append((c, *found))
    for group in by_path.values():
        top = max(k for _, k, _ in group)
        best = [(c, at) for c, k, at in group if k == top]
        first, last = min(at for _, at in best), max(at for _, at in best)
        for c, at in best:
            c.match = "best" + ("" if first == last else "|early" if at == first else "|late" if at == last else "")


@lru_cache(maxsize=8192)
def record_words(strs: frozenset[str]) -> frozenset[str]:
    """The normalized words of a record's string values (records come from ``_walk``'s cache: same objects)."""
    return frozenset(w for v in strs for w in norm(v).split())


def _user_pool(history: list[Message], dlg: Dialogue, used: set[str], written: set[str]) -> list[Candidate]:
    n = len(history)
    last_user = max((i for i, m in enumerate(history) if m.role == "user"), default=-1)
    by_kind: dict[str, list[str]] = {}
    for clause in dlg.clauses:
        for m in clause.mentions:
            seen = by_kind.setdefault(m.kind, [])
            if str(m.value) not in seen:
                seen.append(str(m.value))
    unused = next((str(x.value) for c in dlg.clauses for x in c.mentions if not x.is_name and str(x.value) not in used),
                  None)  # the first value of the requests no call has used
    out = [c for clause in dlg.clauses for m in clause.mentions
           for c in _user_candidates(m, dlg, n, last_user, by_kind, used, written, unused)]
    for j, clause in enumerate(dlg.clauses):  # multi-word items of a list the user wrote
        msg = clause.mentions[0].msg
        out += [Candidate(p, "user", "phrase", n - msg, msg=msg, kind=f"phrase|{k}", clause=j, rank=k,
                          in_last_user=msg == last_user, first_unused=p not in used and k == 0)
                for k, p in enumerate(clause.phrases)]
    for m in dlg.identity:
        parts = [(m.value, "identity")] + (list(zip(m.value.split(), ("name.first", "name.last"))) if m.is_name else [])
        out += [Candidate(v, "identity", key, n - m.msg, msg=m.msg, kind=m.kind, in_last_user=m.msg == last_user)
                for v, key in parts]
    return out


def naming(records: list[Record], cur: Clause) -> tuple[set[str], list[str]]:
    """The values and names of the request that name records: held by at most ``MAX_NAMED`` records of any
    one observation."""
    said = {str(m.value) for m in cur.mentions}
    holding: dict[str, Counter] = {}  # value -> observation -> how many of its records hold the value
    for r in records:
        for v in r.strs & said:
            holding.setdefault(v, Counter())[r.msg] += 1
    values = {v for v in said if max(holding.get(v, Counter()).values(), default=0) <= MAX_NAMED}
    names = [nm for nm in cur.names() if max(Counter(r.msg for r in records if mentions_record(r, set(), [nm]))
                                             .values(), default=0) <= MAX_NAMED]
    return values, names


def _focus(records: list[Record], dlg: Dialogue) -> tuple[list[str], list[tuple[str, int]]]:
    """Mark the records the current request names; their short word values (facts) and list lengths (counts).

    A value names a record when few records of one observation hold it (an origin that every
    search result shares does not). The record whose first field is the id the user gave about
    themselves adds its facts too, as ``who.key=value``.
    """
    cur = dlg.current
    if cur is None:
        return [], []

    values, names = naming(records, cur)
    facts, counts = [], [("names", len(cur.names()))] if cur.names() else []
    ident = {str(m.value) for m in dlg.identity}
    for rec in records:
        rec.focus = mentions_record(rec, values, names)
        words = [(k, v) for k, v in rec.fields.items() if isinstance(v, str) and ENUMISH.match(v)]
        if rec.focus:
            facts += [f"{k}={v}" for k, v in words]
            counts += [(f"n:{k}", len(v)) for k, v in rec.lists.items() if 0 < len(v) < 10]
        elif rec.fields and str(next(iter(rec.fields.values()))) in ident:
            facts += [f"who.{k}={v}" for k, v in words]
    return sorted(set(facts))[:MAX_FACTS], sorted(set(counts))


def _user_candidates(m: Mention, dlg: Dialogue, n: int, last_user: int, by_kind: dict[str, list[str]],
                     used: set[str], written: set[str], first_unused: str | None) -> list[Candidate]:
    seq = by_kind.get(m.kind, [])
    rank = seq.index(str(m.value)) if str(m.value) in seq else None
    extra = ["first_unused_any"] if first_unused == str(m.value) else []
    base = {"age": n - m.msg, "msg": m.msg, "kind": m.kind, "clause": dlg.clause_of(m.value), "rank": rank,
            "extra": extra,
            "in_last_user": m.msg == last_user,
            "first_unused": next((v for v in seq if v not in used), None) == str(m.value),
            "first_unwritten": next((v for v in seq if v not in written), None) == str(m.value)}
    before = m.before[-1] if m.before else ""
    out = [Candidate(m.value, "user", before, **base)]
    if m.is_name:
        first, last = m.value.split()
        out += [Candidate(first, "user", "name.first", **{**base, "extra": list(extra)}),
                Candidate(last, "user", "name.last", **{**base, "extra": list(extra)})]
    return out
