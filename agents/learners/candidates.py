"""Argument candidates beyond the values seen: arithmetic on them, schema values, lists of objects.

Composites are bounded (the newest numbers of the records in focus, small numbers
the user wrote, counts, constants learned from the data), and so are list
edits (a few items, a few values per field): the candidate set stays small and
the learner's ranker decides which one an argument needs.
"""
from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from typing import Any

from evosyn.agents.learners.dialogue import Mention, is_value, shape
from evosyn.agents.learners.features import (
    MAX_FOCUS_NUMBERS,
    Candidate,
    Scene,
    is_int,
    mentions_record,
)
from evosyn.storage.records import Message, Trajectory

DECIMAL = re.compile(r"^\d+\.\d+$")
QUOTED = re.compile(r"'([a-z][a-z ]{1,40}[a-z])'")  # a lower-case phrase in quotes
MAX_ITEMS, MAX_ALTS, MAX_EDITS = 4, 4, 64  # bounds on the edited lists: items, values tried per field, edits per item


def composites(scene: Scene, constants: list[int]) -> list[Candidate]:
    """Numbers from arithmetic on the context, bounded: the learner decides which one an argument needs."""
    nums = [c for c in scene.leaves if c.focus and is_int(c.value) and not isinstance(c.value, bool)]
    nums = nums[-MAX_FOCUS_NUMBERS:]
    cur = scene.dlg.current
    said = sorted({m.value for m in cur.mentions if is_int(m.value) and m.value < 100})[:4] if cur else []
    out = []

    def add(value: int, how: str, c: Candidate) -> None:
        out.append(Candidate(value, "composite", how, age=c.age, tool=c.tool, path=c.path, focus=True))

    # adding 0 or multiplying by 0 or 1 gives back a number already there: not a new composite
    for c in nums:
        for u in (u for u in said if u != 0):
            add(c.value + u, f"{c.key}+said", c)
            if c.value - u >= 0:
                add(c.value - u, f"{c.key}-said", c)
            if 2 <= u <= 10 and c.value not in (0, 1):
                add(c.value * u, f"{c.key}*said", c)
        if c.value not in (0, 1):
            for name, k in scene.counts:
                if k >= 2:
                    add(c.value * k, f"{c.key}*{name}", c)
    for name, k in scene.counts:
        out.append(Candidate(k, "composite", name))
        out += [Candidate(const * k, "composite", f"const{const}*{name}") for const in constants]
    out += [Candidate(const, "composite", f"const{const}") for const in constants]
    for rec in scene.records:  # totals over the lists of a record in focus
        if rec.focus:
            for key, items in rec.lists.items():
                for sub in {k for it in items if isinstance(it, dict) for k, v in it.items() if is_int(v)}:
                    total = sum(it.get(sub, 0) for it in items if isinstance(it, dict) and is_int(it.get(sub)))
                    out.append(Candidate(total, "composite", f"sum:{key}.{sub}"))
    return out


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def json_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types an argument accepts (all of them when the schema does not say)."""
    found: set[str] = set()
    for s in [schema] + schema.get("anyOf", []) + schema.get("oneOf", []):
        t = s.get("type")
        for name in (t if isinstance(t, list) else [t] if t else []):
            found.add("number" if name in ("integer", "number") else name)
        if "enum" in s:
            found.add("string")
    return found or {"boolean", "number", "string", "array", "object", "null"}


def recurring_values(trajectories: list[Trajectory], most: int) -> dict[str, list[str]]:
    """``tool.arg`` -> the text values (prose, not codes) that recur as that argument across trajectories: a
    fixed vocabulary the tool schema does not spell out, offered wherever the context lacks it."""
    return _recurring(trajectories, most, lambda v: v if isinstance(v, str) and not is_value(v) else None)


def recurring_objects(trajectories: list[Trajectory], most: int) -> dict[str, list[str]]:
    """``tool.arg`` -> the JSON objects (as sorted JSON text) that recur as that argument across trajectories:
    the vocabulary of an object argument (a set of options, say), which no context value or schema member
    offers whole; each is a candidate of its own, told apart by its key (``scalars``)."""
    return _recurring(trajectories, most,
                      lambda v: json.dumps(v, sort_keys=True) if isinstance(v, dict) and v else None)


def _recurring(trajectories: list[Trajectory], most: int, as_text) -> dict[str, list[str]]:
    counts: dict[str, Counter] = {}
    for traj in trajectories:
        for m in traj.messages:
            for call in m.tool_calls:
                for arg, v in call.arguments.items():
                    if (text := as_text(v)) is not None:
                        counts.setdefault(f"{call.name}.{arg}", Counter())[text] += 1
    floor = max(3, 0.01 * len(trajectories))
    return {k: [v for v, n in c.most_common(most) if n >= floor] for k, c in counts.items()}


def numbers_in_context(scene: Scene) -> list[tuple[str, int]]:
    """The counts a learned constant multiplies (what ``composites`` uses), for learning the constants."""
    return [("one", 1)] + [(name, k) for name, k in scene.counts if k > 0]


def learned_constants(trajectories: list[Trajectory], writes: set[str], most: int) -> list[int]:
    """Integer ratios of numeric arguments to counts in the context that recur across trajectories."""
    ratios: Counter = Counter()
    for traj in trajectories:
        seen = set()
        for i, m in enumerate(traj.messages):
            if not m.tool_calls:
                continue
            nums = [v for v in m.tool_calls[0].arguments.values() if is_int(v) and v > 0]
            if not nums:
                continue
            scene = Scene.of(traj.messages[:i], writes)
            for v in nums:
                for _, k in numbers_in_context(scene):
                    if k and v % k == 0 and v // k >= 10:  # a multiplier, not a small count
                        seen.add(v // k)
        ratios.update(seen)
    floor = max(3, 0.01 * len(trajectories))
    return sorted(r for r, c in ratios.most_common(most) if c >= floor)


def used_by_arg(history: list[Message]) -> dict[str, set[str]]:
    """Argument name -> the JSON texts of the values the calls so far gave it."""
    used: dict[str, set[str]] = {}
    for m in history:
        for c in m.tool_calls:
            for k, v in c.arguments.items():
                used.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
    return used


def schema_candidates(arg_schema: dict[str, Any]) -> list[Candidate]:
    """Values the tool schema itself offers: enum members, and small counts for integers."""
    out = [Candidate(v, "schema", "enum") for v in arg_schema.get("enum", [])]
    for ref in arg_schema.get("anyOf", []) + arg_schema.get("allOf", []):
        out += [Candidate(v, "schema", "enum") for v in ref.get("enum", [])]
    if arg_schema.get("type") == "string" and not out:  # values the description quotes: 'a' or 'b'
        out += [Candidate(v, "schema", "quoted") for v in dict.fromkeys(QUOTED.findall(arg_schema.get("description", "")))]
    if arg_schema.get("type") == "integer":
        out += [Candidate(v, "schema", "small_int") for v in (0, 1, 2, 3)]
    if arg_schema.get("type") == "boolean":
        out += [Candidate(v, "schema", "bool") for v in (True, False)]
    return out


def scalar_pool(scene: Scene, constants: list[int]) -> list[Candidate]:
    """The scalar candidates of one decision: the user's values, observed leaves, composites (deduplicated)."""
    seen: dict[tuple[str, str, str], Candidate] = {}
    for c in scene.user + scene.leaves:  # the most recent occurrence of each (value, key, source) is enough
        seen[(json.dumps(c.value, sort_keys=True), c.key, c.source)] = c
    out = list(seen.values())
    out += composites(scene, constants)
    return out


def list_candidates(scene: Scene, item_keys: list[str]) -> list[Candidate]:
    """Lists of objects with the item's keys: read from observations, edited by the user's values, or named."""
    if not item_keys:
        return []
    out, seen = [], set()

    def add(value: list, source: str, key: str, extra: list[str], base: Candidate | None = None) -> None:
        sig = json.dumps(value, sort_keys=True)
        if sig in seen or not value:
            return
        seen.add(sig)
        c = Candidate(value, source, key, extra=extra + [f"len={min(len(value), 4)}"])
        if base is not None:
            c.age, c.tool, c.path, c.msg, c.focus = base.age, base.tool, base.path, base.msg, base.focus
        out.append(c)

    cur = scene.dlg.current
    said = list(cur.mentions) if cur else []
    for lst in scene.lists:
        if not all(all(it.get(k) is not None for k in item_keys) for it in lst.value):
            continue
        proj = [{k: it[k] for k in item_keys} for it in lst.value]
        add(proj, "list", lst.key, [], lst)
        if lst.focus:
            for e, item in enumerate(proj[:MAX_ITEMS]):
                for new, extra in _edits(item, said):
                    edited = [dict(it) for it in proj]
                    edited[e] = new
                    add(edited, "list", f"{lst.key}:edit", extra, lst)
    if cur:  # the records the user named, as named
        named = []
        for m in sorted(cur.mentions, key=lambda x: x.pos):
            for rec in reversed(scene.records):
                if all(rec.fields.get(k) is not None for k in item_keys) and mentions_record(
                        rec, set() if m.is_name else {str(m.value)}, [m.value] if m.is_name else []):
                    item = {k: rec.fields[k] for k in item_keys}
                    if item not in named:
                        named.append(item)
                    break
        add(named, "named", "named", [f"named_eq_names={len(named) == len(cur.names())}"])
    return out


def _classes(value: Any) -> str:
    return shape(value).split(":")[0]


def _parts(m: Mention) -> list[Mention]:
    """A name as its two words (each at its own position); any other value as itself."""
    if not m.is_name:
        return [m]
    first, last = m.value.split()
    return [Mention(first, first, m.msg, m.pos, m.before, "name.first"),
            Mention(last, last, m.msg, m.pos + len(first) + 1, m.before, "name.last")]


def _edits(item: dict[str, Any], said: list[Mention]) -> list[tuple[dict[str, Any], list[str]]]:
    """The item with some of its values replaced by same-looking values the user wrote, and how."""
    said = [p for m in said for p in _parts(m)]
    olds = [m for m in said if any(str(m.value) == str(v) for v in item.values())]
    last_old = max((m.pos for m in olds), default=-1)
    options = []
    for k, v in item.items():
        alts = [m for m in said if str(m.value) != str(v) and _classes(m.value) == _classes(v)][:MAX_ALTS]
        options.append([(k, None)] + [(k, m) for m in alts])
    out = []
    for combo in itertools.islice(itertools.product(*options), MAX_EDITS):
        changed = [(k, m) for k, m in combo if m is not None]
        if not changed:
            continue
        new = dict(item)
        n_said = len({str(m.value) for m in olds})
        extra = [f"item_said={min(n_said, 3)}", f"item_all_said={n_said == len(item)}", f"changed={len(changed)}"]
        for k, m in changed:
            new[k] = m.value
            w = m.before[-1] if m.before else ""
            extra += [f"rk={k}", f"rk={k}|w={w}", f"rk={k}|after_old={m.pos > last_old >= 0}",
                      f"rk={k}|kind={m.kind.split('|')[0]}"]
        if len({id(m) for _, m in changed}) < len(changed):
            extra.append("one_value_twice")
        if len(changed) < len(item):
            extra.append("kept=" + ",".join(k for k, m in combo if m is None))
        out.append((new, extra))
    return out


def item_keys(schema: dict[str, Any], resolve) -> list[str]:
    """The required keys of the objects an array argument holds (none if it holds no objects)."""
    items = schema.get("items") or {}
    for s in [items] + items.get("anyOf", []) + items.get("oneOf", []):
        s = resolve(s)
        if s.get("type") == "object" and s.get("properties"):
            return list(s.get("required") or s["properties"])
    return []


# ------------------------------------------------------------ an argument's schema (``tools``: name -> function schema)
def arg_schema(tools: dict[str, dict[str, Any]], tool: str, arg: str) -> dict[str, Any]:
    props = tools.get(tool, {}).get("parameters", {}).get("properties", {})
    return resolve(tools, props.get(arg, {}))


def resolve(tools: dict[str, dict[str, Any]], schema: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` (directly or as the one ``allOf`` member) to the definition it names in any tool's ``$defs``."""
    ref = schema.get("$ref") or next((x.get("$ref") for x in schema.get("allOf", []) if "$ref" in x), None)
    if ref and tools:
        for tool in tools.values():
            defs = tool.get("parameters", {}).get("$defs", {})
            if ref.split("/")[-1] in defs:
                return defs[ref.split("/")[-1]]
    return schema


def item_schema(tools: dict[str, dict[str, Any]], schema: dict[str, Any], key: str) -> dict[str, Any]:
    """The schema of field ``key`` of the objects an array argument holds."""
    items = schema.get("items") or {}
    for s in [items] + items.get("anyOf", []) + items.get("oneOf", []):
        s = resolve(tools, s)
        if key in s.get("properties", {}):
            return resolve(tools, s["properties"][key])
    return {}


def scalars(tools: dict[str, dict[str, Any]], schema: dict[str, Any], pool: list[Candidate],
            learned: list[str] = (), objects: list[str] = ()) -> list[Candidate]:
    """The pool's values of the argument's JSON types (a number as its text where only text is accepted, a
    decimal text as a number where only numbers are), the schema's own values, the values the data gave
    this argument most often (``learned``; ``objects``: the JSON objects, each keyed by its own text, so the
    ranker learns which request words call for which), and for an array of scalars each such value as a
    one-item list."""
    kinds = json_types(schema)
    out = [c for c in pool if json_type(c.value) in kinds]
    if "string" in kinds and "number" not in kinds:
        out += [c.but(str(c.value), "as_text") for c in pool if is_int(c.value)]
    if "number" in kinds and "string" not in kinds:
        out += [c.but(float(c.value), "as_number") for c in pool
                if isinstance(c.value, str) and DECIMAL.match(c.value)]
    out += schema_candidates(schema) + [Candidate(v, "schema", "learned") for v in learned if "string" in kinds]
    if "object" in kinds:
        out += [Candidate(json.loads(v), "schema", f"learned:{v}") for v in objects]
    items = resolve(tools, schema.get("items") or {}) if "array" in kinds else {}
    if items and not item_keys(schema, lambda s: resolve(tools, s)):
        out += [c.but([c.value], "one_item") for c in scalars(tools, items, pool)]
    return out
