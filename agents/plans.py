"""What a domain pack's embedded generator returns: a ``Plan`` for one blueprint.

A pack's ``task_builder(domain, prior)`` gives an object with
``plan(selection, blueprint_id, seed) -> Plan`` that raises ``Infeasible`` when
the selection cannot be realized. The core (``agents/generator.py``) turns the
plan into a family-free ``evosyn.envs.base.TaskDraft``, which the domain's environment
makes one of its family's tasks; the embedded user simulator plays its intents, and the
embedded teacher runs its gold actions.

Shared, domain-free pieces of every embedded generator live here too: the
seeded RNG, the write / read bucket ranges, the default prior for properties
the space does not control yet, the start of every ``plan()`` (``targets``: the
RNG and the write / read targets, drawn in a fixed order so one seed gives one
task), the read budget (``fit_reads``), side-lookup sampling (``sample_new``),
the order of an op's lookups and write (``ops_in_order``), and the seeded
entity sample of ``candidate_entities`` (``sample_up_to``, ``linked``).
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# a gold action: (tool, arguments) for the agent, or (tool, arguments, "user") for a
# device action the user performs (dual-control domains)
Action = tuple


class Infeasible(ValueError):
    """The selection cannot be realized on this DB (recorded as a rejection, never kept)."""


@dataclass
class DefaultPrior:
    """What the generator does for properties the space does not control yet (configurable).

    ``writes``: the write-count distribution of a fulfilment when num_write is not selected.
    ``suppress``: property -> {bucket: keep probability}: while the property is not selected, a plan
    in that bucket is kept only with that probability, drawn once per blueprint (else planned again outside
    the bucket, so it keeps about that share of its natural count); a planted gap
    (``evosyn bench discovery``) is such a suppression.
    """

    writes: dict[int, float] = field(default_factory=lambda: {1: 0.8, 2: 0.15, 3: 0.05})
    suppress: dict[str, dict[str, float]] = field(default_factory=dict)


DEFAULT_PRIOR = DefaultPrior()


@dataclass
class Plan:
    user_id: str  # the customer's identifier, as the domain calls it
    actions: list[Action]  # gold actions in order
    intents: list[dict[str, Any]]  # for the user simulator: {"say", "tool", "arguments"}, in order
    info: list[str]  # what the agent must tell the user (a task's communicate_info)
    refusal: dict[str, str] | None = None  # {"say", "rule"} when the request must be declined
    fillers: list[str] = field(default_factory=list)  # side lookups the user asks for first
    known_info: str = ""  # what the user knows, as the pack words it ("" -> the phrasing's identity line)
    identity: str = ""  # how the user identifies itself, first person ("" -> the phrasing's identity line)
    # the next three are in the environment family's own form (the pack knows its family)
    initial_state: Any = None  # the task's initial state (tau2 dual-control domains: the device)
    assertions: list[Any] = field(default_factory=list)  # assertions on the final state
    reward_basis: list[str] | None = None  # the reward's components; None: the core's default (DB, COMMUNICATE)
    persona: str = ""  # who the user is, when the family's tasks give the user a persona
    # {"ask", "answer"}: the agent must ask for a value the request leaves out before acting (the teacher asks
    # ``ask``, the user answers ``answer``); None: the request is complete
    clarify: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # further fields of the family's task (TaskDraft.extra)


class TaskBuilder(Protocol):
    def plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan: ...


BUCKET_RANGE = {"0": (0, 0), "1": (1, 1), "2": (2, 2), "3-4": (3, 4), "5+": (5, 6)}
TOTAL_CALLS = {"easy": (2, 3), "medium": (4, 5), "hard": (6, 8)}


def action_key(action: Action) -> str:
    return f"{action[0]}:{sorted(action[1].items())}"


def seeded_rng(blueprint_id: str, seed: int, salt: str = "") -> random.Random:
    return random.Random(int(hashlib.sha256(f"{blueprint_id}/{seed}/{salt}".encode()).hexdigest()[:16], 16))


def pick(rng: random.Random, dist: dict[int, float]) -> int:
    return rng.choices(list(dist), weights=list(dist.values()))[0]


def target_counts(sel: dict[str, list[str]], rng: random.Random, prior: DefaultPrior) -> tuple[int, int | None]:
    """(writes, reads or None): exact when num_write / num_read are selected, else the prior."""
    outcome = sel["expected_outcome"][0]
    if "num_write" in sel:
        writes = rng.randint(*BUCKET_RANGE[sel["num_write"][0]])
    else:
        writes = 0 if outcome == "refuse" else pick(rng, prior.writes)
    reads = rng.randint(*BUCKET_RANGE[sel["num_read"][0]]) if "num_read" in sel else None
    return writes, reads


def weighted_order(rng: random.Random, weights: dict[str, float]) -> list[str]:
    """All keys in a random order where heavier keys tend to come first (sampling without replacement)."""
    return sorted(weights, key=lambda k: -rng.random() ** (1.0 / weights[k]))


@dataclass
class Targets:
    """What one ``plan()`` call aims at, drawn from its seeded RNG in a fixed order (same seed, same rows)."""

    rng: random.Random
    writes: int
    reads: int | None  # exact reads when num_read is selected, else None (each try draws its own)
    family: str
    outcome: str
    difficulty: str

    @property
    def exact(self) -> bool:
        return self.reads is not None

    def reads_for_try(self) -> int:
        """The read target of one try: the exact count, or a draw from the difficulty's call range."""
        if self.reads is not None:
            return self.reads
        return max(0, self.rng.randint(*TOTAL_CALLS[self.difficulty]) - self.writes)

    def exhausted(self, what: str, tries: int) -> Infeasible:
        """The error when no ``what`` (user, line) in ``tries`` tries realizes the selection."""
        return Infeasible(f"no {what} in {tries} tries can realize {self.family}/{self.outcome} with "
                          f"{self.writes} writes and {self.reads if self.reads is not None else 'any'} reads")


def targets(sel: dict[str, list[str]], blueprint_id: str, seed: int, prior: DefaultPrior) -> Targets:
    """The seeded RNG and write / read targets of a selection; a refusal that must write is ``Infeasible``."""
    rng = seeded_rng(blueprint_id, seed)
    writes, reads = target_counts(sel, rng, prior)
    outcome = sel["expected_outcome"][0]
    if outcome == "refuse" and writes:
        raise Infeasible("a refusal cannot change state (num_write must be 0)")
    return Targets(rng=rng, writes=writes, reads=reads, family=sel["task_family"][0], outcome=outcome,
                   difficulty=sel.get("difficulty_profile", ["medium"])[0])


def fit_reads(have: int, reads: int, exact: bool) -> int | None:
    """The read target once ``have`` reads are required: None when an exact target is too small for them."""
    if have > reads:
        return None if exact else have
    return reads


def unique_actions(actions: Iterable[Action], seen: Collection[str] = ()) -> list[Action]:
    """The actions without repeats (first occurrence kept, in order), leaving out keys in ``seen``."""
    return list({action_key(a): a for a in actions if action_key(a) not in seen}.values())


def sample_new(rng: random.Random, pool: Iterable[Action], seen: Collection[str], n: int) -> list[Action] | None:
    """``n`` distinct actions of ``pool`` not in ``seen``, sampled; None when there are fewer."""
    unique = unique_actions(pool, seen)
    if len(unique) < n:
        return None
    return rng.sample(unique, n)


class RequestOp(Protocol):
    """An op of a single-control generator: its lookups, then one write the user asks for."""

    tool: str
    arguments: dict[str, Any]
    say: str
    reads: list[Action]


def ops_in_order(ops: Iterable[RequestOp]) -> tuple[list[Action], list[dict[str, Any]]]:
    """Gold actions and user intents of ``ops``: each op's lookups right before it (each lookup once), then
    the op; one intent per op, naming its call."""
    actions: list[Action] = []
    intents: list[dict[str, Any]] = []
    done: set[str] = set()
    for op in ops:
        for read in op.reads:
            if action_key(read) not in done:
                done.add(action_key(read))
                actions.append(read)
        actions.append((op.tool, op.arguments))
        intents.append({"say": op.say, "tool": op.tool, "arguments": op.arguments})
    return actions, intents


def sample_up_to(rng: random.Random, items: Sequence[Any], k: int) -> list[Any]:
    """A seeded sample of ``k`` items, or all of them in a random order when there are fewer."""
    return rng.sample(items, min(k, len(items)))


def linked(table: dict[str, Any], ids: Iterable[str]) -> list[tuple[str, Any]]:
    """``(id, record)`` for each id that ``table`` holds, in order (e.g. the records a customer owns)."""
    return [(i, table[i]) for i in ids if table.get(i) is not None]
