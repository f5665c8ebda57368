"""Trajectory properties: domain-generic, measurable facts about a task's tool calls.

One registry serves three readers, so a property means the same thing everywhere:
- the verifier (envs/factors.py) measures every property on a replayed trajectory
  (its observed factors, and the factor gate for a blueprint that requested one);
- the embedded generator (agents/generator.py) measures the same property on a
  plan's gold actions, to realize a requested bucket (and a prior's suppression);
- the diagnostic probes (agents/probes.py) bucket tasks by it.

A property reads only the calls (name, arguments, kind, who made them, whether a
write changed state) and the domain pack's generic maps (``entity_keys``,
``moves_money``, ``search_prefixes``, ``gated_prefixes``): no domain is named
here. Which properties a pack's generator can control is the pack's
``controllable`` (declared, and tested bucket by bucket).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from evosyn.envs.packs import DomainPack

BUCKETS = ["0", "1", "2", "3-4", "5+"]


@dataclass(frozen=True)
class Call:
    """One tool call as a property sees it."""

    name: str
    arguments: dict[str, Any]
    kind: str  # "read", "write", or the environment's other kinds
    by_user: bool = False  # a device action the user performs (dual-control domains)
    changed: bool = True  # for a write: whether it changed state (a failed or no-op write does not count)

    @property
    def is_write(self) -> bool:
        return self.kind == "write" and self.changed


def bucket(n: int) -> str:
    return "0" if n <= 0 else "1" if n == 1 else "2" if n == 2 else "3-4" if n <= 4 else "5+"


def _small(n: int) -> str:
    return "0" if n <= 0 else "1" if n == 1 else "2+"


@dataclass(frozen=True)
class Property:
    key: str
    values: tuple[str, ...]
    measure: Callable[[Sequence[Call], DomainPack], str]
    ordinal: bool  # values are ordered (Spearman, failure trends); else categories
    doc: str
    min_writes: dict[str, int] = field(default_factory=dict)  # value -> state-changing writes it needs at least


def _writes(calls: Sequence[Call]) -> list[Call]:
    return [c for c in calls if c.is_write]


def _entities(calls: Sequence[Call], pack: DomainPack) -> str:
    ids = {str(v) for c in calls for k, v in c.arguments.items() if k in pack.entity_keys and v not in (None, "")}
    return "0-1" if len(ids) <= 1 else "2" if len(ids) == 2 else "3+"


def _multi_item(calls: Sequence[Call], pack: DomainPack) -> str:
    return "yes" if any(isinstance(v, list) and len(v) >= 2 for c in _writes(calls) for v in c.arguments.values()) \
        else "no"


def _distinct_tools(calls: Sequence[Call], pack: DomainPack) -> str:
    n = len({c.name for c in calls})
    return "1-2" if n <= 2 else "3" if n == 3 else "4+"


def _write_mix(calls: Sequence[Call], pack: DomainPack) -> str:
    names = {c.name for c in _writes(calls)}
    return "none" if not names else "one_tool" if len(names) == 1 else "mixed"


def _interleaved(calls: Sequence[Call], pack: DomainPack) -> str:
    seen_write = False
    for c in calls:
        if c.is_write:
            seen_write = True
        elif seen_write and c.kind == "read" and not c.by_user:
            return "yes"
    return "no"


PROPERTIES: dict[str, Property] = {p.key: p for p in [
    Property("num_write", tuple(BUCKETS), lambda cs, pk: bucket(len(_writes(cs))), True,
             "state-changing write calls"),
    Property("num_read", tuple(BUCKETS), lambda cs, pk: bucket(sum(c.kind == "read" for c in cs)), True,
             "read calls"),
    Property("entities_touched", ("0-1", "2", "3+"), _entities, True,
             "distinct entities (the pack's entity_keys values) the calls name"),
    Property("multi_item", ("no", "yes"), _multi_item, True,
             "a write carries a list argument with 2+ entries (passengers, items, payment splits)", {"yes": 1}),
    Property("money_moves", ("0", "1", "2+"), lambda cs, pk: _small(sum(pk.moves_money(c.name, c.arguments)
                                                                       for c in _writes(cs))), True,
             "writes that move money (the pack's moves_money)", {"1": 1, "2+": 2}),
    Property("policy_gated", ("0", "1", "2+"), lambda cs, pk: _small(sum(c.name.startswith(pk.gated_prefixes)
                                                                        for c in _writes(cs))
                                                                    if pk.gated_prefixes else 0), True,
             "writes a policy check must precede (the pack's gated_prefixes)", {"1": 1, "2+": 2}),
    Property("search_calls", ("0", "1", "2+"), lambda cs, pk: _small(sum(
        c.kind == "read" and bool(pk.search_prefixes) and c.name.startswith(pk.search_prefixes) for c in cs)), True,
        "read calls that search or list (the pack's search_prefixes)"),
    Property("distinct_tools", ("1-2", "3", "4+"), _distinct_tools, True, "distinct tools called"),
    Property("write_mix", ("none", "one_tool", "mixed"), _write_mix, True,
             "how many different write tools the writes use", {"one_tool": 1, "mixed": 2}),
    Property("interleaved", ("no", "yes"), _interleaved, True, "the agent reads again after a write", {"yes": 1}),
    Property("user_actions", ("0", "1", "2+"), lambda cs, pk: _small(sum(c.by_user for c in cs)), True,
             "actions the user performs on their own device (dual-control domains)"),
]}


def measure_all(calls: Sequence[Call], pack: DomainPack, keys: Sequence[str] | None = None) -> dict[str, str]:
    """property -> bucket of the calls (every property, or ``keys``)."""
    return {k: PROPERTIES[k].measure(calls, pack) for k in (keys if keys is not None else PROPERTIES)}


def controllable(*keys: str) -> dict[str, list[str]]:
    """A pack's ``controllable`` map: each named property with its buckets."""
    return {k: list(PROPERTIES[k].values) for k in keys}


def min_writes(sel: dict[str, list[str]]) -> int:
    """The fewest state-changing writes a selection of property values needs (0: none)."""
    return max((PROPERTIES[k].min_writes.get(v[0], 0) for k, v in sel.items() if k in PROPERTIES and v), default=0)


def bucket_index(key: str, value: str) -> int | None:
    """The position of a value in an ordinal property's buckets; None for categories or unknown values."""
    p = PROPERTIES.get(key)
    if p is None or not p.ordinal or value not in p.values:
        return None
    return p.values.index(value)


def check_prior(suppress: dict[str, dict[str, float]], pack: DomainPack) -> None:
    """``RunConfig.prior.suppress`` names properties the pack's generator controls, and their buckets
    (one ``ConfigError`` line naming the field otherwise), before any work."""
    from evosyn.storage.userfiles import ConfigError

    domain, controllable = pack.name, pack.controllable
    for key, buckets in suppress.items():
        if key not in controllable:
            raise ConfigError(f"prior.suppress.{key}: the {domain} generator does not control it "
                              f"(it controls: {', '.join(controllable) or 'nothing'})")
        for value in buckets:
            if value not in controllable[key]:
                raise ConfigError(f"prior.suppress.{key}.{value}: not a bucket of {key} "
                                  f"(its buckets: {', '.join(controllable[key])})")
