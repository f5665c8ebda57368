"""tau2-bench domains behind our ``Domain`` / ``Episode`` interface.

The tau2 environment, tools and DB models are used as they are; what we add is
a DB loaded once per process with copy-on-write episodes (``cow.py``), tool
specs with tau2's own READ / WRITE / GENERIC tags, and official tasks by split.
Nothing here imports litellm.
"""
from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from envs.base import Domain, EnvSummary, Episode, Observation, Requestor, ToolKind, ToolSpec
from envs.tau2.cow import CowDB

from loguru import logger as _tau2_logger

_tau2_logger.disable("tau2")  # tau2 logs every tool call at DEBUG and warns about .env

_KIND = {"read": "read", "write": "write", "generic": "generic", "think": "generic"}


@dataclass(frozen=True)
class Tau2Source:
    """Where a tau2 domain lives and how its DB can be copied cheaply."""

    name: str
    module: str  # e.g. tau2.domains.<name>.environment
    copy_on_write: bool  # DBs whose fields are dicts of entities; a small DB is deep-copied instead
    default_split: str = "base"


class Tau2Episode(Episode):
    def __init__(self, domain: "Tau2Domain", env: Any):
        self.domain = domain
        self.env = env

    def step(self, name: str, arguments: dict[str, Any], requestor: Requestor = "assistant") -> Observation:
        from tau2.data_model.message import ToolCall

        try:
            call = ToolCall(id="step", name=name, arguments=dict(arguments), requestor=requestor)
            msg = self.env.get_response(call)
        except Exception as exc:  # tau2 itself refused the call shape: still an observation
            return Observation(content=f"Error: {exc}", error=True)
        return Observation(content=msg.content or "", error=bool(msg.error))

    def state_digest(self) -> str:
        h = hashlib.sha256()
        agent_db = self.env.tools.db
        cow = self.domain.cow
        if cow is not None and type(agent_db) is cow.model:
            h.update(cow.digest(agent_db).encode())
        else:
            h.update((self.env.get_db_hash() or "").encode())
        h.update(b"|")
        h.update((self.env.get_user_db_hash() or "").encode())
        return h.hexdigest()

    def check_assertion(self, assertion: Any) -> bool:
        try:
            return bool(self.env.run_env_assertion(assertion, raise_assertion_error=False))
        except Exception:
            return False

    def run_function(self, call: Any) -> Any:
        return self.env.run_env_function_call(call)


class Tau2Domain(Domain):
    def __init__(self, source: Tau2Source):
        self.source = source
        self.name = source.name
        self._mod = importlib.import_module(source.module)
        self._base_env = self._mod.get_environment()
        self.policy: str = self._base_env.get_policy()
        self.cow = CowDB(self._base_env.tools.db) if source.copy_on_write else None
        self._user_db = getattr(self._base_env.user_tools, "db", None) if self._base_env.user_tools else None

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

    # ------------------------------------------------------------ episodes
    def _fresh_env(self) -> Any:
        if self.cow is not None:
            return self._mod.get_environment(db=self.cow.fresh())
        kwargs: dict[str, Any] = {"db": self._base_env.tools.db.model_copy(deep=True)}
        if self._user_db is not None:
            kwargs["user_db"] = self._user_db.model_copy(deep=True)
        return self._mod.get_environment(**kwargs)

    def episode(self, initial_state: Any = None) -> Tau2Episode:
        env = self._fresh_env()
        if initial_state is not None:
            env.set_state(initialization_data=initial_state.initialization_data,
                          initialization_actions=initial_state.initialization_actions,
                          message_history=initial_state.message_history or [])
        return Tau2Episode(self, env)

    # ------------------------------------------------------------ tasks
    @cached_property
    def _split_ids(self) -> dict[str, list[str]]:
        return self._mod.get_tasks_split()

    @cached_property
    def _all_tasks(self) -> list[Any]:
        return self._mod.get_tasks(task_split_name=None)

    @cached_property
    def _by_id(self) -> dict[str, Any]:
        return {t.id: t for t in self._all_tasks}

    def official_task(self, task_id: str) -> Any | None:
        return self._by_id.get(task_id)

    def splits(self) -> dict[str, int]:
        return {name: len(ids) for name, ids in self._split_ids.items()}

    def tasks(self, split: str | None = None) -> list[Any]:
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



