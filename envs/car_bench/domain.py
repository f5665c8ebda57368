"""CAR-bench behind our ``Domain`` interface.

``CarBenchDomain(data_root=None)`` loads a data folder once (``evosyn.envs.car_bench.data``:
the argument, else ``$EVOSYN_CARBENCH_DATA``, else the bundled fixture) and
serves its 57 tools, its official tasks by split and fresh episodes::

    dom = CarBenchDomain()
    task = dom.tasks("base_train")[0]
    ep = dom.episode(task)                      # the task's context_init_config, calendar and removals
    ep.step("get_climate_settings", {})        # Observation(content='{"status": "SUCCESS", ...}')

Splits are ``<family>_<split>`` (family: base, hallucination, disambiguation;
split: train, test) and ``train`` / ``test`` for every family together; ``test``
is the one a command takes when none is named.
``task_policy(task)`` is the policy text with the task's location and clock.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import ValidationError

from evosyn.envs.base import Domain, EnvSummary, Requestor, TaskDraft, ToolKind, ToolSpec
from evosyn.envs.car_bench.data import FIXTURE, CarBenchData, resolve_root
from evosyn.envs.car_bench.episode import CarBenchEpisode
from evosyn.envs.car_bench.family import task_row
from evosyn.envs.car_bench.state import CarInitialState, split_config
from evosyn.envs.car_bench.tasks import SPLITS, CarBenchTask, load_tasks
from evosyn.envs.car_bench.tools import TOOLS

DIGEST_VERSION = 1
POLICY_TEXT = (Path(__file__).parent / "policy.md").read_text(encoding="utf-8")


class CarBenchDomain(Domain):
    name = "car_bench"
    # CAR-bench has no split of every task (tau2's base): a command that names none takes the held-out tasks
    # of every family
    default_split = "test"
    evaluation_split = "test"
    benchmark = "CAR-bench"

    def __init__(self, data_root: str | Path | None = None):
        self.root = resolve_root(data_root)
        self.data = CarBenchData(self.root)
        self.digest_scheme = f"d{DIGEST_VERSION}/car_bench"
        self.data_source = "" if self.root == FIXTURE else str(self.root.resolve())
        self.policy = self.task_policy(None)

    # ------------------------------------------------------------ tools
    @cached_property
    def _specs(self) -> dict[str, ToolSpec]:
        return {name: ToolSpec(name=name, kind=t.kind, requestor="assistant",
                               description=t.schema()["function"]["description"], parameters=t.parameters)
                for name, t in TOOLS.items()}

    @cached_property
    def _validators(self) -> dict[str, Draft202012Validator]:
        return {name: Draft202012Validator(t.parameters) for name, t in TOOLS.items()}

    def tools(self, requestor: Requestor | None = None) -> list[ToolSpec]:
        return [] if requestor == "user" else list(self._specs.values())

    def tools_for(self, task: CarBenchTask | None) -> list[ToolSpec]:
        """The tools an agent sees on ``task``: a hallucination task's removed tools and parameters are gone."""
        removed = [p.split(".") for p in (task.removed_part or [])] if task is not None else []
        gone = {p[0] for p in removed if len(p) == 1}
        params = {p[0]: p[1:] for p in removed if len(p) >= 2 and p[0] != "result"}
        out = []
        for spec in self.tools("assistant"):
            if spec.name in gone:
                continue
            if spec.name in params:
                schema = _without(spec.parameters, params[spec.name])
                spec = ToolSpec(spec.name, spec.kind, spec.requestor, spec.description, schema)
            out.append(spec)
        return out

    def tool_kind(self, name: str, requestor: Requestor = "assistant") -> ToolKind | None:
        spec = self._specs.get(name) if requestor == "assistant" else None
        return spec.kind if spec else None

    def validate_arguments(self, name: str, arguments: dict[str, Any],
                           requestor: Requestor = "assistant") -> str | None:
        if requestor != "assistant" or name not in TOOLS:
            return f"no {requestor} tool named {name!r}"
        if not isinstance(arguments, dict):
            return f"{name}: arguments must be an object"
        error = next(iter(self._validators[name].iter_errors(arguments)), None)
        return None if error is None else f"{name}: arguments do not match the schema: {error.message}"

    # ------------------------------------------------------------ episodes
    def episode(self, initial_state: Any = None) -> CarBenchEpisode:
        """A fresh car: ``initial_state`` is a ``CarBenchTask``, a ``CarInitialState``, a ``context_init_config``
        dict, or None (CAR-bench's defaults)."""
        if isinstance(initial_state, CarBenchTask):
            initial_state = initial_state.initial_state
        elif isinstance(initial_state, dict):
            initial_state = CarInitialState(context_init_config=initial_state)
        return CarBenchEpisode(self, initial_state)

    def task_policy(self, task: CarBenchTask | None) -> str:
        _, fixed = split_config(task.context_init_config if task is not None else {})
        return POLICY_TEXT.format(location=fixed.current_location.model_dump_json(),
                                  datetime=fixed.current_datetime.model_dump_json())

    # ------------------------------------------------------------ tasks
    @cached_property
    def _by_split(self) -> dict[str, list[CarBenchTask]]:
        by_split = load_tasks(self.root)
        for split in SPLITS:
            joined = [t for name, tasks in by_split.items() if name.endswith(f"_{split}") for t in tasks]
            if joined:
                by_split[split] = joined
        return by_split

    @cached_property
    def _by_id(self) -> dict[str, CarBenchTask]:
        return {t.task_id: t for name in SPLITS for t in self._by_split.get(name, [])}

    def tasks(self, split: str | None = None) -> list[CarBenchTask]:
        if split is None:
            return list(self._by_id.values())
        if split not in self._by_split:
            raise KeyError(f"unknown split {split!r} for car_bench; known: {', '.join(self._by_split)}")
        return list(self._by_split[split])

    def task_from_json(self, data: dict[str, Any]) -> CarBenchTask:
        """A stored task (``CarBenchTask.to_json``, a dataset row) back as a task; ``ValueError`` if it is none."""
        try:
            return CarBenchTask.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"not a CAR-bench task: {' '.join(str(exc).split())[:300]}") from exc

    def official_task(self, task_id: str) -> CarBenchTask | None:
        return self._by_id.get(task_id)

    def make_task(self, draft: TaskDraft) -> CarBenchTask:
        return self.task_from_json(task_row(draft))

    def reward(self, task: Any, messages: list[Any], passed: Mapping[str, bool]) -> float:
        """CAR-bench's reward, by our replay (``evosyn.envs.car_bench.reward``), not the verifier's components."""
        from evosyn.envs.car_bench.reward import reward

        return reward(self, task, messages).reward

    def with_tasks(self, path: Path) -> CarBenchDomain:
        """CAR-bench's data, its task files and mock data, from the folder ``path`` (a snapshot of the dataset):
        ``evosyn evaluate --official --tasks``; ``ValueError``, one line, for a folder that is not one."""
        from evosyn.envs.car_bench.data import DataMissing

        try:
            dom = CarBenchDomain(path)
            dom.splits()
        except DataMissing as exc:
            raise ValueError(str(exc)) from None
        dom.bind_pack(self.pack)  # the same domain on other data: its hooks are this one's
        return dom

    def splits(self) -> dict[str, int]:
        return {name: len(tasks) for name, tasks in self._by_split.items()}

    def summary(self) -> EnvSummary:
        d = self.data
        tables = {"locations": d.locations, "pois": d.pois, "contacts": d.contacts, "calendars": d.calendars}
        return EnvSummary(domain=self.name, entity_counts={k: len(v) for k, v in tables.items()},
                          example_ids={k: list(v)[:3] for k, v in tables.items()},
                          tools={s.name: s.kind for s in self.tools("assistant")})


def _without(schema: dict[str, Any], path: list[str]) -> dict[str, Any]:
    """A copy of an object schema without the property at ``path`` (through nested objects and array items)."""
    out = {**schema, "properties": dict(schema.get("properties", {}))}
    head, rest = path[0], path[1:]
    if head not in out["properties"]:
        return out
    if not rest:
        del out["properties"][head]
        out["required"] = [r for r in schema.get("required", []) if r != head]
        return out
    child = out["properties"][head]
    if child.get("type") == "array" and "items" in child:
        out["properties"][head] = {**child, "items": _without(child["items"], rest)}
    else:
        out["properties"][head] = _without(child, rest)
    return out
