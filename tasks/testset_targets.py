"""What the test sets aim at: tau2's official distribution of observed factors, and uniform draws.

``official_cells``: the joint distribution of (task family, outcome, write count,
read count) over a domain's official tasks with gold actions, each observed the
way the verifier observes a synthetic task: the gold actions replayed as a
trajectory (``evosyn.envs.gold.gold_messages``) in the real tau2 environment and scored
by ``evosyn.envs.verify.run_checks``, whose ``observed`` is ``evosyn.envs.factors.observe`` of
the replay (as ``evosyn verify --official`` does; a gold that changes nothing outside an
information request is a refusal: ``official_cell``). A cell the generator cannot realize
lends its official mass to the ``nearest`` realized cell when the set is topped up, or, with no realized
cell of its family, is asked again with any read count (``relaxed``). ``allocate`` splits a set's
size over cells by largest remainder; ``uniform_draw`` draws the single-valued
factors of a space uniformly and independently with a seeded RNG.
"""
from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from functools import lru_cache
from typing import Iterable

from evosyn.envs.base import Domain, EnvTask
from evosyn.envs.gold import gold_messages
from evosyn.envs.packs import DomainPack
from evosyn.envs.verify import run_checks
from evosyn.storage.records import SynthesisSpace

CELL = ("task_family", "expected_outcome", "num_write", "num_read")
Cell = tuple[str, ...]


def has_gold_actions(task: EnvTask) -> bool:
    return bool(task.gold_actions)


def cell_of(observed: dict[str, list[str]]) -> Cell:
    return tuple((observed.get(k) or ["none"])[0] for k in CELL)


ANY_READS = "any"  # a relaxed cell's read count: the Planner picks it, and any observed one matches


def relaxed(cell: Cell) -> Cell:
    """``cell`` with its read count left to the generator. tau2's gold action lists often omit the lookups an
    agent makes first (a domain's golds may list none), so an official read count may be one no synthetic
    task of that family, outcome and write count can show."""
    return (*cell[:3], ANY_READS)


def target_of(allowed: dict[str, list[str]]) -> Cell:
    """The cell an official-matched direction asked for (its ``allowed_values``; no read count: relaxed; a
    factor the space lacks, such as CAR-bench's outcome, is left free as well)."""
    return tuple((allowed.get(k) or [ANY_READS])[0] for k in CELL)


def in_cell(observed: dict[str, list[str]], cell: Cell) -> bool:
    """A task observed in ``cell`` (a relaxed cell takes any read count)."""
    return all(o == c for o, c in zip(cell_of(observed), cell) if c != ANY_READS)


def official_cell(pack: DomainPack, observed: dict[str, list[str]]) -> Cell:
    """An official task's cell. Its gold is a replay with no assistant text, so the verifier's refusal wording
    never shows: a task whose gold changes nothing and whose family is not an information request (the pack's
    ``planner_rules.info_families``) is a request the agent must decline."""
    cell = cell_of(observed)
    family, outcome, writes, reads = cell
    if writes == "0" and family not in pack.planner_rules.info_families:
        return family, "refuse", writes, reads
    return cell


@lru_cache(maxsize=None)
def _official(dom: Domain) -> tuple[tuple[Cell, int], ...]:
    """Per environment (a data folder's is another object: its own official tasks), replayed once a process."""
    cells = Counter(official_cell(dom.pack, run_checks(dom, t, gold_messages(dom, t)).observed)
                    for t in dom.tasks(None) if has_gold_actions(t))
    return tuple(sorted(cells.items()))


def nearest(cell: Cell, realized: Iterable[Cell]) -> Cell | None:
    """The realized cell closest to an unrealizable one: the same family, then outcome, then the nearest write
    and read counts (bucket order); None when no realized cell shares its family."""
    order = ["0", "1", "2", "3-4", "5+"]

    def gap(a: str, b: str) -> int:
        return abs(order.index(a) - order.index(b)) if a in order and b in order else 9

    same = [c for c in realized if c[0] == cell[0]]
    if not same:
        return None
    return min(same, key=lambda c: (c[1] != cell[1], gap(c[2], cell[2]), gap(c[3], cell[3]), c))


def no_official_reason(env: Domain) -> str | None:
    """Why the domain has no official-matched test set (None: it has one): no official tasks, or none with
    gold actions to observe a cell on. Its runs then test on the uniform set alone."""
    domain, tasks = env.name, env.tasks(None)
    if not tasks:
        return f"the {domain} domain has no official tasks"
    if not any(has_gold_actions(t) for t in tasks):
        return f"none of the {domain} domain's {len(tasks)} official tasks has gold actions"
    return None


def official_cells(env: Domain) -> Counter:
    """cell -> number of the domain's official tasks (all splits, those with gold actions) observed in it."""
    return Counter(dict(_official(env)))


def allocate(weights: dict[Cell, float], n: int) -> dict[Cell, int]:
    """``n`` slots over the cells in proportion to ``weights``, by largest remainder (ties: cell order)."""
    total = sum(weights.values())
    if n <= 0 or total <= 0:
        return {}
    quotas = {c: n * w / total for c, w in sorted(weights.items())}
    out = {c: math.floor(q) for c, q in quotas.items()}
    for c in sorted(quotas, key=lambda c: (-(quotas[c] - out[c]), c))[:n - sum(out.values())]:
        out[c] += 1
    return {c: k for c, k in out.items() if k}


def rng_for(*parts: object) -> random.Random:
    return random.Random(int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:16], 16))


def drawn_keys(space: SynthesisSpace) -> list[str]:
    """The single-valued active factors: what a uniform draw fixes."""
    return sorted(f.key for f in space.active if f.cardinality.min == f.cardinality.max == 1)


def uniform_draw(space: SynthesisSpace, rng: random.Random) -> dict[str, list[str]]:
    """One value per single-valued active factor, each uniform over its values (restrictions respected).

    Multi-valued factors (policy focus, tool-use patterns, challenges) are left to the Planner, whose own
    sampling without preferences is uniform over their size and values, seeded from the direction id.
    """
    out = {}
    for key in drawn_keys(space):
        f = space.factor(key)
        out[key] = [rng.choice([v for v in f.values if v in space.restrictions.get(key, f.values)])]
    return out


def distribution(cells: Iterable[Cell]) -> dict[Cell, float]:
    counts = Counter(cells)
    total = sum(counts.values())
    return {c: k / total for c, k in counts.items()} if total else {}


def total_variation(p: dict[Cell, float], q: dict[Cell, float]) -> float:
    return 0.5 * sum(abs(p.get(c, 0.0) - q.get(c, 0.0)) for c in set(p) | set(q))


def marginals(rows: Iterable[dict[str, list[str]]], keys: Iterable[str]) -> dict[str, dict[str, int]]:
    """key -> value -> count of rows whose first value of ``key`` is that value (rows lacking it: left out)."""
    rows = list(rows)
    out: dict[str, dict[str, int]] = {}
    for key in keys:
        counts = Counter(r[key][0] for r in rows if r.get(key))
        out[key] = dict(sorted(counts.items()))
    return out


def tv_from_uniform(counts: dict[str, int], values: list[str]) -> float:
    """Total-variation distance of a marginal's counts from the uniform distribution over ``values``."""
    total = sum(counts.values())
    return 0.5 * sum(abs(counts.get(v, 0) / total - 1 / len(values)) for v in values) if total else 1.0
