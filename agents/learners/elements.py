"""Arguments that are lists of scalars, chosen item by item: how many items, and which, in which sequence.

A request can name several things in one breath ("exchange the A (...) for the one with ... and the B (...) for
the one with ..."), and a call then takes a list with one item per thing named. The learner scores every scalar
candidate of the list's item type as an *element* of the list (the argument model, labelled by whether the
data's list holds it), so the length of the list is learned with its items: per thing named, the element the
model finds most likely, if it finds it more likely in than not (at least one element in all), in the sequence
the request names them. Lists that the data always gives one length (a list of things and a list of what each becomes) get
one length, the longest the model chose for any of them (``equal_lengths``, ``extended``).

What ties an element to one of the things named is where its own record's words fall in the request: the
request is cut at its ``and``s into parts, and an observed value is tagged with the first part whose words its
record matches best among the values of the same path (the early or late one when several match as well, as
``features._match`` ranks them over the whole request). Nothing here names a domain, a tool or a field.
"""
from __future__ import annotations

import json
import re
from typing import Any

from evosyn.agents.learners.candidates import item_keys, json_types, resolve
from evosyn.agents.learners.features import Candidate, Scene, norm, record_words
from evosyn.storage.records import Message, Trajectory

AND = re.compile(r"\band\b", re.IGNORECASE)
MAX_PARTS = 4  # the part count and index as features saturate here
CHOSEN = 0.5  # an element is in the list when the model finds it more likely in than not


def element_schema(tools: dict[str, dict[str, Any]], schema: dict[str, Any]) -> dict[str, Any] | None:
    """The item schema of an argument that is a list of scalars (None for any other argument: a scalar, or a
    list of objects, which ``candidates.list_candidates`` builds whole)."""
    if json_types(schema) != {"array"} or not schema.get("items"):
        return None
    if item_keys(schema, lambda s: resolve(tools, s)):
        return None
    return resolve(tools, schema["items"])


def used_elements(history: list[Message]) -> dict[str, set[str]]:
    """Argument name -> the JSON texts of the items the calls so far put in its lists."""
    used: dict[str, set[str]] = {}
    for m in history:
        for c in m.tool_calls:
            for k, v in c.arguments.items():
                if isinstance(v, list):
                    used.setdefault(k, set()).update(json.dumps(x, sort_keys=True) for x in v)
    return used


def _request_text(scene: Scene) -> str:
    cur = scene.dlg.current
    return cur.text if cur else ""


def part_tags(scene: Scene) -> tuple[int, dict[int, tuple[int, str]]]:
    """The request's part count, and id(observed leaf) -> (its part, its tag there), made once per scene."""
    known = scene.__dict__.get("_part_tags")
    if known is not None:
        return known
    parts = [p for p in (norm(x).split() for x in AND.split(_request_text(scene))) if p]
    positions = []
    for words in parts:
        pos: dict[str, int] = {}
        for i, w in enumerate(words):
            pos.setdefault(w, i)
        positions.append(pos)
    groups: dict[tuple[int, str], list[tuple[Candidate, int, float]]] = {}
    for c in scene.leaves:
        if not c.within or not isinstance(c.value, str):
            continue
        own = record_words(scene.records[c.within[-1]].strs)
        for p, pos in enumerate(positions):
            hit = own & pos.keys()
            if hit:
                groups.setdefault((p, f"{c.path}/{c.key}"), []).append((c, len(hit), sum(pos[w] for w in hit) / len(hit)))
    tags: dict[int, tuple[int, str]] = {}
    for (p, _), group in sorted(groups.items(), key=lambda kv: kv[0]):
        top = max(k for _, k, _ in group)
        best = [(c, at) for c, k, at in group if k == top]
        first, last = min(at for _, at in best), max(at for _, at in best)
        for c, at in best:
            if id(c) not in tags:  # the first part where it matches best
                where = "" if first == last else "|early" if at == first else "|late" if at == last else "|mid"
                tags[id(c)] = (p, f"best{where}|k={min(top, 4)}")
    known = scene.__dict__["_part_tags"] = (len(parts), tags)
    return known


def elements(scene: Scene, cands: list[Candidate]) -> list[Candidate]:
    """The scalar candidates as candidate elements of a list: each tagged with how its record matches a part
    of the request (``part_tags``) and how many parts the request has."""
    n, tags = part_tags(scene)
    out = []
    for c in cands:
        part, tag = tags.get(id(c), (MAX_PARTS, "none"))
        e = c.but(c.value, f"part_at={min(part, MAX_PARTS)}|of={min(n, MAX_PARTS)}")
        e.match = ""  # how its record matches the whole request: its part's match (below) says it per thing named
        e.extra.append(f"part={tag}|path={c.path}")
        e.__dict__["_part"] = part
        out.append(e)
    return out


def picked(cands: list[Candidate], scores) -> list[int]:
    """The elements of the list, in the sequence of the request's parts: per part, its best element scored above
    ``CHOSEN`` (a thing named once is one item); the best element overall where no part has one."""
    parts: dict[int, int] = {}
    seen: set[str] = set()
    for i in sorted(range(len(cands)), key=lambda i: -scores[i]):
        if scores[i] <= CHOSEN:
            break
        part, key = cands[i].__dict__.get("_part", MAX_PARTS), json.dumps(cands[i].value, sort_keys=True)
        if part < MAX_PARTS and part not in parts and key not in seen:
            parts[part] = i
            seen.add(key)
    return [parts[p] for p in sorted(parts)] or [int(max(range(len(cands)), key=lambda i: scores[i]))]


def extended(cands: list[Candidate], scores, chosen: list[int], k: int) -> list[int]:
    """``chosen`` cut or filled to ``k`` elements: filled with the best elements of the parts it has none from
    (then with the next best values), in the sequence of the request's parts."""
    if len(chosen) >= k:
        return chosen[:k]
    part = {i: cands[i].__dict__.get("_part", MAX_PARTS) for i in range(len(cands))}
    have = {json.dumps(cands[i].value, sort_keys=True) for i in chosen}
    used = {part[i] for i in chosen}
    out = list(chosen)
    best = sorted(range(len(cands)), key=lambda i: -scores[i])
    for fresh in (True, False):
        for i in best:
            key = json.dumps(cands[i].value, sort_keys=True)
            if len(out) == k:
                break
            if key not in have and (not fresh or part[i] not in used and part[i] < MAX_PARTS):
                have.add(key)
                used.add(part[i])
                out.append(i)
    rank = {i: r for r, i in enumerate(best)}
    return sorted(out, key=lambda i: (part[i], rank[i]))


def equal_lengths(trajectories: list[Trajectory]) -> dict[str, list[str]]:
    """Tool -> its list arguments that every call of it in the data gives lists of one length (a list of
    things and a list of what each becomes): the learner gives them one length too."""
    seen: dict[str, set[str]] = {}
    broken: set[str] = set()
    for traj in trajectories:
        for m in traj.messages:
            for call in m.tool_calls:
                lists = {k: len(v) for k, v in call.arguments.items() if isinstance(v, list)}
                if len(lists) < 2:
                    continue
                if len(set(lists.values())) > 1:
                    broken.add(call.name)
                seen.setdefault(call.name, set()).update(lists)
    return {tool: sorted(args) for tool, args in seen.items() if tool not in broken}
