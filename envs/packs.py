"""Domain packs: everything that knows one domain, registered under its name.

A pack is a package under ``domains/`` (one folder per domain, found by scanning
that folder) or a third-party package named by an ``evosyn.domains`` entry
point. Its ``__init__`` calls ``register(SomePack())`` and imports nothing
heavy: the environment, the generator and the other hooks load when first
used. The core asks ``get_pack(name)`` and never names a domain.

``DomainPack`` holds the hooks with their generic defaults; a pack overrides
what its domain needs. Hooks the agents layer uses (generator, user phrasing,
learner candidates, LLM-generator context) return objects typed loosely here
(``Any``) because this module sits in the envs layer; their contracts are
documented on each method and live in ``agents/plans.py``.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from dataclasses import dataclass, field
from importlib import metadata, resources
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from envs.base import Domain
    from storage.records import Message, ToolCall

PACKAGE = "domains"  # the folder of built-in packs
ENTRY_POINT_GROUP = "evosyn.domains"


class UnknownDomain(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return self.args[0]


class NoEnvironment(RuntimeError):
    """A pack with a synthesis space but no executable environment (e.g. an ontology-only pack)."""


@dataclass(frozen=True)
class PlannerRules:
    """Compatibility rules of the embedded planner for one domain.

    ``violable``: task family -> the policy foci a refusal of that family can break
    (a refusal must name one). ``no_read_refusals``: families whose refusal needs
    no lookup (a categorical rule). ``info_families``: families that can be pure
    information requests (a fulfilment with no writes). ``min_refusal_reads``:
    families whose refusal needs more than one lookup -> how many (a refusal
    with fewer reads is planned as another violable family). ``min_fulfil_reads``:
    family -> the fewest reads a fulfilment with one write needs (identification
    plus the lookups the policy demands), and ``reads_per_extra_write`` the reads
    each further write adds; a fulfilment whose ``num_read`` bucket is below that
    gets a bucket that can hold it. ``implies``: ``"factor=value"`` -> {factor: the values it goes with}: a
    blueprint that selects the value gets one of those (a task type fixes the behaviour it tests).
    """

    violable: dict[str, list[str]] = field(default_factory=dict)
    no_read_refusals: list[str] = field(default_factory=list)
    info_families: list[str] = field(default_factory=list)
    min_refusal_reads: dict[str, int] = field(default_factory=dict)
    min_fulfil_reads: dict[str, int] = field(default_factory=dict)
    reads_per_extra_write: int = 0
    implies: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @property
    def defined(self) -> bool:
        """Whether the pack states any rule (a pack without rules leaves LLM blueprints unchecked)."""
        return bool(self.violable or self.no_read_refusals or self.info_families or self.min_refusal_reads
                    or self.implies)


@dataclass(frozen=True)
class UserPhrasing:
    """How the embedded user simulator and teacher word domain facts.

    ``identity`` is formatted with the scenario's ``user_id`` (the customer's
    identifier, whatever the domain calls it).
    """

    identity: str = "My customer id is {user_id}."
    known_identity: str = "Your customer id is {user_id}."  # the task's known_info when the plan gives none
    give_identity: str = "Sure, it is {user_id}."
    ask_identity: str = "I can help with that. Could you please give me your customer id first?"
    vague_opening: str = "I need help with my account."
    vague_hint: str = "something on my account"  # how the task text quotes a vague start
    stress: str = "Please be quick, this is really stressing me out."
    unknown_info: str = "You do not know the company's internal rules."
    identity_words: tuple[str, ...] = ("customer id",)  # what an agent's request for the identity mentions


class DomainPack:
    """The hooks of one domain. Subclass, set ``name`` and override what differs."""

    name: str = ""
    default: bool = False  # the domain the CLI uses when --domain is not given (exactly one pack)
    description: str = ""

    # ------------------------------------------------------------ environment
    def environment(self) -> "Domain":
        """A new process-wide ``Domain`` (DB loaded once); called once per process by ``get_domain``."""
        raise NoEnvironment(f"domain {self.name!r} has a synthesis space but no environment to run tasks in")

    @property
    def has_environment(self) -> bool:
        return type(self).environment is not DomainPack.environment

    def initial_space(self) -> dict[str, Any]:
        """The initial synthesis space (App. B.1) as raw JSON: ``ontology.json`` in the pack's package."""
        module = sys.modules[type(self).__module__]
        package = module.__name__ if hasattr(module, "__path__") else module.__package__  # a pack in __init__ too
        return json.loads(resources.files(package).joinpath("ontology.json").read_text())

    # ------------------------------------------------------------ policy
    def policy_rules(self) -> Callable[[Any, "ToolCall", list["Message"]], list[str]] | None:
        """``(episode, call, history) -> violations`` checked before each write; None: not checked."""
        return None

    official_waivers: dict[str, dict[str, str]] = {}  # official task id -> {rule code: reason}

    # ------------------------------------------------------------ observed factors (envs/factors.py)
    family_by_tool: dict[str, str] = {}  # state-changing tool -> task family
    family_keywords: list[tuple[str, str]] = []  # (keyword in the user's first message, family), in order
    default_family: str = "unknown"
    focus_by_tool: dict[str, str] = {}  # state-changing tool -> policy focus
    change_kind_by_prefix: list[tuple[str, str]] = []  # (write-tool prefix, state_change_type); else "modify"
    state_changes: list[str] = ["none", "modify", "mixed"]  # reference values of state_change_type
    compute_tools: tuple[str, ...] = ("calculate",)
    transfer_tools: tuple[str, ...] = ("transfer_to_human_agents",)

    # ------------------------------------------------------------ tool-use patterns (envs/tool_patterns.py)
    shape_values: dict[str, str] = {}  # generic shape -> this domain's ontology value
    profile_reads: tuple[str, ...] = ()  # tool-name prefixes that read the customer's profile
    identify_reads: tuple[str, ...] = ()  # tool-name prefixes that identify the customer
    entity_keys: tuple[str, ...] = ()  # argument names that identify an entity (order_id, ...)
    gated_prefixes: tuple[str, ...] = ()  # writes a policy check must precede
    money_keys: tuple[str, ...] = ()  # arguments of a write that move money
    create_prefixes: tuple[str, ...] = ()  # write tools that create an entity (search_then_create)
    search_prefixes: tuple[str, ...] = ()  # read tools that search or list (search_then_create)
    split_keys: tuple[str, ...] = ()  # list arguments whose 2+ entries split one action (split_action)
    batch_keys: tuple[str, ...] = ()  # list arguments whose 2+ entries batch items in one write (batched_items)
    # words of write-tool names a confirmation request need not repeat (envs/policies/common.py)
    confirmation_stopwords: tuple[str, ...] = ()

    def moves_money(self, name: str, arguments: dict[str, Any]) -> bool:
        return any(k in arguments for k in self.money_keys)

    # ------------------------------------------------------------ verifier audit (envs/perturb.py)
    def extra_write(self, arguments: list[dict[str, Any]]) -> "ToolCall | None":
        """A state-changing call to add to a trajectory whose calls had these arguments (None: cannot)."""
        return None

    # ------------------------------------------------------------ synthesis (agents layer)
    planner_rules: PlannerRules = PlannerRules()
    phrasing: UserPhrasing = UserPhrasing()
    # properties the embedded generator controls exactly, factor -> values it realizes
    # (what the Reflector may promote, and what a uniform test set can draw)
    controllable: dict[str, list[str]] = {}
    # names the generator's behaviour: a pack bumps it when the tasks it builds change, so the fixed test sets
    # (tasks/testset.py, whose run ids carry it) are built anew rather than mixed across versions
    generator_version: str = "1"

    @property
    def has_generator(self) -> bool:
        """Whether the pack has an embedded generator (overrides ``task_builder``)."""
        return type(self).task_builder is not DomainPack.task_builder

    def task_builder(self, domain: "Domain", prior: Any) -> Any:
        """The embedded generator's planner: ``.plan(selection, blueprint_id, seed) -> agents.plans.Plan``,
        raising ``agents.plans.Infeasible``; ``prior`` is an ``agents.plans.DefaultPrior``."""
        raise NotImplementedError(f"domain {self.name!r} has no embedded generator")

    def candidate_entities(self, domain: "Domain", rng: Any, k: int = 4) -> dict[str, Any]:
        """A seeded sample of real entities for the LLM generator's prompt."""
        return {"example_ids": domain.summary().example_ids}

    # ------------------------------------------------------------ feedback and learning
    def extra_probes(self) -> dict[str, tuple[Callable[[Any], str], list[str]]]:
        """More diagnostic probes: name -> (TaskProfile -> bucket, buckets)."""
        return {}
    # No learner hook: the embedded learner reads every fact from the data (agents/learners/), so no pack
    # needs to hand it candidates; one would belong here only for a fact a real agent reads from the policy.


# ------------------------------------------------------------------ registry
_PACKS: dict[str, DomainPack] = {}
_INSTANCES: dict[str, "Domain"] = {}
_loaded = False


def register(pack: DomainPack) -> None:
    if not pack.name:
        raise ValueError(f"{type(pack).__name__}: a domain pack needs a name")
    if pack.name in _PACKS:
        raise ValueError(f"domain {pack.name!r} is already registered")
    _PACKS[pack.name] = pack


def _load() -> None:
    global _loaded
    if _loaded:
        return
    root = importlib.import_module(PACKAGE)
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if info.ispkg:
            importlib.import_module(f"{PACKAGE}.{info.name}")
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        ep.load()  # a third-party pack reusing a built-in name is refused by register()
    _loaded = True  # only now: a pack that failed to import fails every lookup, never a partial registry


def known(with_environment: bool = False) -> list[str]:
    _load()
    return sorted(n for n, p in _PACKS.items() if p.has_environment or not with_environment)


def get_pack(name: str) -> DomainPack:
    _load()
    if name not in _PACKS:
        raise UnknownDomain(f"unknown domain {name!r}; known domains: {', '.join(sorted(_PACKS))}")
    return _PACKS[name]


def default_domain() -> str:
    _load()
    defaults = sorted(n for n, p in _PACKS.items() if p.default)
    if len(defaults) != 1:
        raise RuntimeError(f"exactly one domain pack must be the default, found {defaults or 'none'}")
    return defaults[0]


def get_domain(name: str) -> "Domain":
    """The process-wide domain object (DB loaded once, cheap fresh episodes)."""
    pack = get_pack(name)
    if name not in _INSTANCES:
        env = pack.environment()
        env._pack = pack  # resolved here, once: callers below reach the hooks as ``env.pack``
        _INSTANCES[name] = env
    return _INSTANCES[name]
