"""Domain packs: everything that knows one domain, registered under its name.

A pack is a package found in one of three places: a folder under ``domains/``
(the built-in packs), a folder under one of the user's pack folders
(``EVOSYN_DOMAINS``, a list of folders separated like ``PATH``; by default
``./domains`` in the working directory, where ``evosyn new-domain`` writes),
or a third-party package named by an ``evosyn.domains`` entry point. Its
``__init__`` calls ``register(SomePack())`` and imports nothing heavy: the
environment, the generator and the other hooks load when first used. The core
asks ``get_pack(name)`` and never names a domain. A pack that fails to import
is recorded with its error (``broken()``) and refused by name; the other packs
load as usual.

``DomainPack`` holds the hooks with their generic defaults; a pack overrides
what its domain needs. Hooks the agents layer uses (generator, user phrasing,
learner candidates, LLM-generator context) return objects typed loosely here
(``Any``) because this module sits in the envs layer; their contracts are
documented on each method and live in ``agents/plans.py``.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pkgutil
import sys
import types
from importlib import metadata, resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from evosyn.envs.pack_rules import PlannerRules, UserPhrasing  # re-exported: what a pack imports from here

if TYPE_CHECKING:
    from evosyn.envs.base import Domain
    from evosyn.storage.records import Message, ToolCall

PACKAGE = "evosyn.domains"  # the folder of built-in packs
ENTRY_POINT_GROUP = "evosyn.domains"
USER_PACKAGE = "evosyn_user_domains"  # the package the user's pack folders are imported under (relative imports work)
USER_FOLDERS_ENV = "EVOSYN_DOMAINS"  # folders of user packs, separated by os.pathsep
USER_FOLDER_DEFAULT = "domains"  # relative to the working directory


class UnknownDomain(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return self.args[0]


class BrokenPack(UnknownDomain):
    """A pack that failed to import: its name and the error, refused on every lookup of that name."""


class NoEnvironment(RuntimeError):
    """A pack with a synthesis space but no executable environment (e.g. an ontology-only pack)."""


class PackError(ValueError):
    """A pack setting the core cannot work with: one line naming the setting and the fix."""


class DomainPack:
    """The hooks of one domain. Subclass, set ``name`` and override what differs.

    Required: ``name``, ``environment()``, ``ontology.json`` beside the pack. Needed by the embedded backend:
    ``task_builder`` (the generator); by ``evosyn run``: ``controllable`` (the uniform test set and the
    Reflector). Every other setting is optional, and its default changes recorded facts (``evosyn envs check``
    names each one left at its default, and docs/guides/domain-pack.md says what each changes).
    """

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

    def environment_from(self, folder: Path) -> "Domain":
        """A new ``Domain`` reading its data from ``folder`` instead of its default (the run config's
        ``env_data``); ``PackError``, one line, when the folder is not this environment's data. A pack whose
        environment reads no data folder leaves it: ``env_data`` naming it is refused."""
        raise PackError(f"env_data: domain {self.name!r} reads no data folder (remove its entry)")

    @property
    def reads_data(self) -> bool:
        return type(self).environment_from is not DomainPack.environment_from

    def initial_space(self) -> dict[str, Any]:
        """The initial synthesis space (App. B.1) as raw JSON: ``ontology.json`` in the pack's package."""
        path = resources.files(self.package).joinpath("ontology.json")
        if not path.is_file():
            raise PackError(f"ontology.json: domain {self.name!r} has no initial synthesis space; write "
                            f"ontology.json beside its pack ({path}; `evosyn new-domain` writes one)")
        return json.loads(path.read_text())

    @property
    def package(self) -> str:
        """The pack's package (``domains.<name>``, ``evosyn_user_domains.<name>``, an installed one)."""
        module = sys.modules[type(self).__module__]
        return module.__name__ if hasattr(module, "__path__") else module.__package__  # a pack in __init__ too

    # ------------------------------------------------------------ policy (policy.py beside the pack)
    def policy_module(self) -> types.ModuleType | None:
        """The ``policy`` module of the pack's package; None when the pack has none (no machine-checked rules:
        allowed, and `evosyn envs check` warns)."""
        if not self.package:  # a pack class defined in a script: no package to hold a policy module
            return None
        name = f"{self.package}.policy"
        found = sys.modules.get(name)  # asked before every checked write: skip the import machinery
        if found is not None:
            return found
        if importlib.util.find_spec(name) is None:
            return None
        return importlib.import_module(name)

    def policy_rules(self) -> Callable[[Any, "ToolCall", list["Message"]], list[str]] | None:
        """``(episode, call, history) -> violations`` checked before each write (``policy.check_write``, each
        violation starting with its ``[rule code]``); None: not checked."""
        module = self.policy_module()
        if module is None:
            return None
        if not callable(getattr(module, "check_write", None)):
            raise PackError(f"policy.py: {module.__name__} has no check_write(episode, call, history) function; "
                            "define it (return [] for no violation), or delete policy.py")
        return module.check_write

    @property
    def official_waivers(self) -> dict[str, dict[str, str]]:
        """Official task id -> {rule code: why its gold may break it} (``policy.OFFICIAL_WAIVERS``)."""
        return getattr(self.policy_module(), "OFFICIAL_WAIVERS", {})

    # SHA-256 of an official tasks file -> the published release it is (named with every score: envs/task_sets.py)
    task_releases: dict[str, str] = {}

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
        raising ``evosyn.agents.plans.Infeasible``; ``prior`` is an ``evosyn.agents.plans.DefaultPrior``."""
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
_DATA: dict[str, Path] = {}  # domain -> the data folder its environment reads (``use_data``); absent: its default
_BROKEN: dict[str, str] = {}  # pack (folder or entry point) name -> why it failed to import, one line
_ERRORS: dict[str, BaseException] = {}  # ... and the exception itself (its traceback, for `evosyn envs check`)
_loaded = False


def register(pack: DomainPack) -> None:
    if not pack.name:
        raise ValueError(f"{type(pack).__name__}: a domain pack needs a name")
    if pack.name in _PACKS:
        raise ValueError(f"domain {pack.name!r} is already registered")
    _PACKS[pack.name] = pack


def user_folders() -> list[Path]:
    """The folders of the user's packs: ``EVOSYN_DOMAINS`` (``os.pathsep``-separated), else ``./domains``;
    never the built-in folder itself (a working directory at the repository's root)."""
    raw = os.environ.get(USER_FOLDERS_ENV)
    folders = [Path(p) for p in raw.split(os.pathsep) if p] if raw is not None else [Path(USER_FOLDER_DEFAULT)]
    builtin = {Path(p).resolve() for p in importlib.import_module(PACKAGE).__path__}
    return [f.resolve() for f in folders if f.is_dir() and f.resolve() not in builtin]


def _user_package(folders: list[Path]) -> str:
    """A package whose ``__path__`` is the user's folders, so each pack in them imports as
    ``evosyn_user_domains.<folder>`` (its relative imports work, and no folder name shadows a module)."""
    package = sys.modules.get(USER_PACKAGE)
    if package is None:
        package = types.ModuleType(USER_PACKAGE, "The user's domain packs (envs/packs.py: user_folders).")
        package.__path__ = []
        sys.modules[USER_PACKAGE] = package
    package.__path__[:] = [str(f) for f in folders]
    return USER_PACKAGE


def _import(name: str, load: Callable[[], Any], folder: Path | None = None) -> None:
    """Import one pack; a failure is recorded under ``name`` (what it registered undone) as one line naming the
    pack's file and line (``folder``: the pack's own), and the others go on."""
    before = set(_PACKS)
    try:
        load()
    except KeyboardInterrupt:
        raise
    # any error of the pack's own code, SystemExit included (a pack calling sys.exit at import must not end
    # every command): reported by name, never fatal to the others
    except BaseException as exc:
        from evosyn.envs.pack_errors import fault_line

        for added in set(_PACKS) - before:
            del _PACKS[added]
        _BROKEN[name] = fault_line(exc, folder)
        _ERRORS[name] = exc


def _load() -> None:
    global _loaded
    if _loaded:
        return
    root = importlib.import_module(PACKAGE)  # the built-in folder itself missing is an install error: raised
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if info.ispkg and not info.name.startswith("_"):
            _import(info.name, lambda n=info.name: importlib.import_module(f"{PACKAGE}.{n}"),
                    Path(info.module_finder.path) / info.name)
    folders = user_folders()
    if folders:
        package = _user_package(folders)
        for info in sorted(pkgutil.iter_modules([str(f) for f in folders]), key=lambda i: i.name):
            if info.ispkg and not info.name.startswith("_"):
                _import(info.name, lambda n=info.name: importlib.import_module(f"{package}.{n}"),
                        Path(info.module_finder.path) / info.name)
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        _import(ep.name, ep.load)  # a third-party pack reusing a built-in name is refused by register()
    _loaded = True


def known(with_environment: bool = False, with_generator: bool = False) -> list[str]:
    """The registered packs' names; ``with_environment`` / ``with_generator``: only those that have one."""
    _load()
    return sorted(n for n, p in _PACKS.items() if (p.has_environment or not with_environment)
                  and (p.has_generator or not with_generator))


def broken() -> dict[str, str]:
    """Packs that failed to import: name -> the error, one line (``evosyn envs list`` shows them)."""
    _load()
    return dict(sorted(_BROKEN.items()))


def import_error(name: str) -> BaseException | None:
    """The exception a broken pack raised on import (None: it loaded, or there is no such pack)."""
    _load()
    return _ERRORS.get(name)


def get_pack(name: str) -> DomainPack:
    _load()
    if name not in _PACKS:
        if name in _BROKEN:
            raise BrokenPack(f"domain {name!r} failed to load: {_BROKEN[name]} (fix the pack; "
                             f"`evosyn --debug envs check {name}` shows the traceback)")
        raise UnknownDomain(f"unknown domain {name!r}; known domains: {', '.join(sorted(_PACKS))}")
    return _PACKS[name]


class DefaultConflict(PackError):
    """Not exactly one pack sets ``default = True``: one line naming them (with where) and the fix."""


def registered(name: str) -> DomainPack | None:
    """The pack named ``name``, or None when no pack has that name (for a caller that may ask of any name)."""
    try:
        return get_pack(name)
    except UnknownDomain:
        return None


def default_domain() -> str:
    _load()
    defaults = sorted(n for n, p in _PACKS.items() if p.default)
    if len(defaults) == 1:
        return defaults[0]
    if not defaults:
        raise DefaultConflict("no domain pack is the default: pass --domain NAME (known domains: "
                              f"{', '.join(sorted(_PACKS))}), or set default = True in one pack")
    builtin = [n for n in defaults if _PACKS[n].package.startswith(PACKAGE + ".")]
    others = [n for n in defaults if n not in builtin] if builtin else defaults[1:]
    from evosyn.envs.pack_errors import setting_line

    named = " and ".join(f"{n!r} ({setting_line(type(_PACKS[n]), 'default')})" for n in defaults)
    raise DefaultConflict(f"default: {len(defaults)} domain packs are the default, {named}; remove "
                          f"`default = True` from {' and '.join(map(repr, others))} (the default is "
                          f"{(builtin or defaults)[0]!r}) and pass --domain NAME to use another")


def get_domain(name: str) -> "Domain":
    """The process-wide domain object (DB loaded once, cheap fresh episodes): on the data ``use_data`` set."""
    return environment_of(get_pack(name))


def environment_of(pack: DomainPack) -> Domain:
    """``get_domain`` for a pack already in hand (a check that must report on the pack when its environment
    fails to load): the process-wide environment, built on first use and bound to the pack."""
    name = pack.name
    if name not in _INSTANCES:
        folder = _DATA.get(name)
        env = pack.environment_from(folder) if folder is not None else pack.environment()
        env.bind_pack(pack)  # resolved here, once: callers below reach the hooks as ``env.pack``
        _INSTANCES[name] = env
    return _INSTANCES[name]


def rebuilt(name: str, data: str | None) -> "Domain":
    """The environment a pickled one stands for, in this process (``Domain.__reduce__``: a process task runner's
    worker): the pack of that name, on the data folder the sending process had set for it."""
    if data is not None and _DATA.get(name) != Path(data):
        _DATA[name] = Path(data)
        _INSTANCES.pop(name, None)
    return get_domain(name)


def pickled(env: "Domain") -> tuple[Callable[..., "Domain"], tuple[str, str | None]]:
    """How an environment travels to another process: by its name and data folder, rebuilt by that process's
    registry (an environment holds its DB, weak references and the pack's modules: none of that pickles)."""
    folder = _DATA.get(env.name)
    return rebuilt, (env.name, None if folder is None else str(folder))


def use_data(env_data: dict[str, str], name: str | None = None) -> None:
    """Set the data each domain of ``env_data`` (the run config's: domain -> folder) reads from now on in this
    process, and put back its default for every other domain whose data was set before (a sweep's next run).
    Checked before any work: each entry names a known pack that reads data; ``name`` (the run's domain) is
    loaded from its folder now, so a folder that is not its data is one ``PackError`` line here."""
    wanted: dict[str, Path] = {}
    for domain, folder in env_data.items():
        pack = get_pack(domain)  # UnknownDomain names the known ones
        if not pack.reads_data:
            raise PackError(f"env_data.{domain}: domain {domain!r} reads no data folder (remove its entry)")
        wanted[domain] = Path(folder).expanduser().resolve()
    for domain in set(_DATA) | set(wanted):
        if _DATA.get(domain) != wanted.get(domain):
            _INSTANCES.pop(domain, None)  # built again, on the new data, by the next get_domain
    _DATA.clear()
    _DATA.update(wanted)
    if name in wanted:
        try:
            get_domain(name)
        except PackError:
            _DATA.pop(name)
            raise
