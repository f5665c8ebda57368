"""Observed ``tool_use_pattern``: the shapes of tool use a realized trajectory shows.

Re-derived from the replayed tool calls (and the confirmation turns around the
writes), never from the plan. Each rule detects a generic shape; the domain pack's
``shape_values`` names it with the domain's ontology value (App. B.1). A trajectory can show
several shapes (the ontology allows one to three); a shape a domain has no value
for is not reported. Rules:

- ``search_then_create``: a search / list read precedes a state-changing create
  (``book_*``).
- ``lookup_then_modify``: a read precedes a state-changing write that is not a create.
- ``multi_entity``: the reads touch two or more distinct entities besides the
  user's profile (distinct (tool, arguments) among non-profile reads).
- ``check_before_action``: the agent read and then declined (no state change,
  refusal), or read the very entity (same id, the pack's ``entity_keys``) that a
  policy-gated write (the pack's ``gated_prefixes``) then changed.
- ``calculation``: a compute tool was called, or a state-changing write moves money
  (the pack's ``moves_money``: by default an amount / payment argument).
- ``confirmed_change``: a state-changing write follows an assistant confirmation
  request and the user's affirmative answer.
- ``split_action``: two or more state-changing writes on the same entity, or one
  payment split over two or more payment methods.
- ``batched_items``: one state-changing write over two or more items.
- ``authenticate_then_act``: a user-identification read (the pack's ``identify_reads``)
  precedes a state-changing write.
"""
from __future__ import annotations

import json
import re
from typing import Iterable

from evosyn.envs.packs import DomainPack
from evosyn.storage.records import Message

_CONFIRM_ASK = re.compile(r"\b(confirm|proceed|go ahead)\b", re.I)
_AFFIRM = re.compile(r"\b(yes|yeah|yep|confirm|confirmed|go ahead|proceed|sure|ok|okay)\b", re.I)


def _entity(arguments: dict, keys: tuple[str, ...]) -> tuple | None:
    ids = tuple((k, str(arguments[k])) for k in keys if k in arguments)
    return ids or None


def _confirmed(call_index: int, messages: list[Message]) -> bool:
    """The last user text before the call is affirmative and answers an assistant confirmation request."""
    for n in range(call_index - 1, 0, -1):
        m = messages[n]
        if m.role == "user" and m.content:
            ask = next((p for p in reversed(messages[:n]) if p.role == "assistant" and p.content), None)
            return bool(_AFFIRM.search(m.content)) and ask is not None and bool(_CONFIRM_ASK.search(ask.content))
    return False


def shapes(steps: Iterable, messages: list[Message], refused: bool, pack: DomainPack | None = None) -> set[str]:
    pack = pack or DomainPack()
    steps = list(steps)
    position = {id(m): n for n, m in enumerate(messages)}
    out: set[str] = set()
    reads_so_far: list = []
    write_entities: dict[tuple, int] = {}
    wrote = False
    for step in steps:
        name, args = step.call.name, step.call.arguments or {}
        if name in pack.compute_tools:
            out.add("calculation")
        if step.kind == "read":
            reads_so_far.append(step)
            continue
        if step.kind != "write" or not step.changed_state or step.error:
            continue
        wrote = True
        creates = name.startswith(pack.create_prefixes)
        if creates and any(r.call.name.startswith(pack.search_prefixes) for r in reads_so_far):
            out.add("search_then_create")
        if not creates and reads_so_far:
            out.add("lookup_then_modify")
        if any(r.call.name.startswith(pack.identify_reads) for r in reads_so_far):
            out.add("authenticate_then_act")
        ent = _entity(args, pack.entity_keys)
        if name.startswith(pack.gated_prefixes) and ent and any(
                _entity(r.call.arguments or {}, pack.entity_keys) == ent for r in reads_so_far):
            out.add("check_before_action")
        if pack.moves_money(name, args):
            out.add("calculation")
        if any(len(args.get(k) or []) >= 2 for k in pack.split_keys):
            out.add("split_action")
        if ent:
            write_entities[ent] = write_entities.get(ent, 0) + 1
        if any(len(args.get(k) or []) >= 2 for k in pack.batch_keys):
            out.add("batched_items")
        recorded = position.get(id(step.recorded)) if step.recorded is not None else None
        if recorded is not None and _confirmed(recorded - 1, messages):
            out.add("confirmed_change")
    if any(n >= 2 for n in write_entities.values()):
        out.add("split_action")
    entities = {(r.call.name, json.dumps(r.call.arguments, sort_keys=True, default=str)) for r in steps
                if r.kind == "read" and not r.call.name.startswith(pack.profile_reads)}
    if len(entities) >= 2:
        out.add("multi_entity")
    if refused and reads_so_far and not wrote:
        out.add("check_before_action")
    return out


def tool_use_patterns(pack: DomainPack, steps: Iterable, messages: list[Message], refused: bool) -> list[str]:
    """The shapes the trajectory shows, each named by the domain ``pack``'s ``shape_values`` (unnamed: left out)."""
    names = pack.shape_values
    return sorted({names[s] for s in shapes(steps, messages, refused, pack) if s in names})
