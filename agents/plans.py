"""What a domain pack's embedded generator returns: a ``Plan`` for one blueprint.

A pack's ``task_builder(domain, prior)`` gives an object with
``plan(selection, blueprint_id, seed) -> Plan`` that raises ``Infeasible`` when
the selection cannot be realized. The core (``agents/generator.py``) turns the
plan into a tau2 task; the embedded user simulator plays its intents, and the
embedded teacher runs its gold actions.

Shared, domain-free pieces of every embedded generator live here too: the
seeded RNG, the write / read bucket ranges, and the default prior for
properties the space does not control yet.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

# a gold action: (tool, arguments) for the agent, or (tool, arguments, "user") for a
# device action the user performs (dual-control domains)
Action = tuple


class Infeasible(ValueError):
    """The selection cannot be realized on this DB (recorded as a rejection, never kept)."""


@dataclass
class DefaultPrior:
    """What the generator does for properties the space does not control yet (configurable)."""

    writes: dict[int, float] = field(default_factory=lambda: {1: 0.8, 2: 0.15, 3: 0.05})


DEFAULT_PRIOR = DefaultPrior()


@dataclass
class Plan:
    user_id: str  # the customer's identifier, as the domain calls it
    actions: list[Action]  # gold actions in order
    intents: list[dict[str, Any]]  # for the user simulator: {"say", "tool", "arguments"}, in order
    info: list[str]  # what the agent must tell the user (tau2 communicate_info)
    refusal: dict[str, str] | None = None  # {"say", "rule"} when the request must be declined
    fillers: list[str] = field(default_factory=list)  # side lookups the user asks for first
    known_info: str = ""  # what the user knows, as the pack words it ("" -> the phrasing's identity line)
    identity: str = ""  # how the user identifies itself, first person ("" -> the phrasing's identity line)
    initial_state: dict[str, Any] | None = None  # a tau2 initial_state (dual-control domains: the device)
    env_assertions: list[dict[str, Any]] = field(default_factory=list)  # tau2 EnvAssertions of the final state
    reward_basis: list[str] | None = None  # tau2 reward basis; None: the core's default (DB, COMMUNICATE)


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
