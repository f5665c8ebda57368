"""CAR-bench's official tasks: our model of one jsonl row, and the splits of a data folder.

A row has ``task_id``, ``persona``, ``calendar_id``, ``instruction``,
``context_init_config`` (a JSON string), ``actions`` (a JSON string: a list of
``{"name", "kwargs", "index", "dependent_on_action_index"}``), ``task_type``,
``disambiguation_element_internal`` / ``_user`` / ``_note`` and
``removed_part`` (a JSON string or null: ``"tool"``, ``"tool.param"`` or
``"result.tool.field"``). Files are ``tasks/<type>_<split>.jsonl`` (type: base,
hallucination, disambiguation; split: train, test). ``CarBenchTask`` parses the
JSON strings; ``to_row`` writes them back, byte-compatible with the dataset.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evosyn.envs.car_bench.data import read_jsonl
from evosyn.envs.car_bench.family import CarTaskView
from evosyn.envs.car_bench.state import CarInitialState

TaskType = Literal["base", "hallucination_missing_tool", "hallucination_missing_tool_parameter",
                   "hallucination_missing_tool_response", "disambiguation_internal", "disambiguation_user"]
HALLUCINATION_TYPES = frozenset({"hallucination_missing_tool", "hallucination_missing_tool_parameter",
                                 "hallucination_missing_tool_response"})
FAMILIES = ("base", "hallucination", "disambiguation")
SPLITS = ("train", "test")
# actions that talk to the user rather than call a tool: never part of the state or the tool subset
USER_FACING = frozenset({"respond", "message_to_user", "clarify_with_user_request_of_invalid_tool_arguments",
                         "clarify_with_user_request_of_unavailable_tools",
                         "disambiguate_with_user_suitable_tool_results", "disambiguate_with_user_suitable_tools",
                         "disambiguate_with_user_tool_arguments", "ask_user_for_confirmation"})


class GoldAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    index: int | None = None
    dependent_on_action_index: int | list[int] | None = None


class CarBenchTask(BaseModel, CarTaskView):
    """One CAR-bench task. ``id`` is ``task_id`` (the core looks tasks up by ``id``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    persona: str = ""
    calendar_id: str = ""
    instruction: str = ""
    context_init_config: dict[str, Any] = Field(default_factory=dict)
    actions: list[GoldAction] = Field(default_factory=list)
    task_type: TaskType = "base"
    disambiguation_element_internal: str | None = None
    disambiguation_element_user: str | None = None
    disambiguation_element_note: str | None = None
    removed_part: list[str] | None = None

    @field_validator("context_init_config", "actions", "removed_part", mode="before")
    @classmethod
    def _from_json_string(cls, value: Any) -> Any:
        """The dataset stores these three as JSON strings; a parsed value passes through."""
        return json.loads(value) if isinstance(value, str) else value

    @property
    def id(self) -> str:
        return self.task_id

    @property
    def initial_state(self) -> CarInitialState:
        """What ``CarBenchDomain.episode`` starts the task from."""
        return CarInitialState(context_init_config=self.context_init_config, calendar_id=self.calendar_id,
                               removed_part=list(self.removed_part or []))

    @property
    def family(self) -> str:
        """base, hallucination or disambiguation."""
        return self.task_type.split("_")[0]

    @property
    def is_hallucination(self) -> bool:
        return self.task_type in HALLUCINATION_TYPES

    @property
    def tool_actions(self) -> list[GoldAction]:
        """Gold actions that call a tool (not the ones that talk to the user)."""
        return [a for a in self.actions if a.name not in USER_FACING]

    def to_json(self) -> dict[str, Any]:
        """The task as stored: the dataset's row (``CarBenchDomain.task_from_json`` reads it back)."""
        return self.to_row()

    def to_row(self) -> dict[str, Any]:
        """The dataset's row: JSON strings where the dataset stores them."""
        row = self.model_dump()
        row["context_init_config"] = json.dumps(self.context_init_config)
        row["actions"] = json.dumps([a.model_dump() for a in self.actions])
        row["removed_part"] = json.dumps(self.removed_part) if self.removed_part is not None else None
        return row


def task_file(root: Path, family: str, split: str) -> Path:
    return root / "tasks" / f"{family}_{split}.jsonl"


def load_tasks(root: Path) -> dict[str, list[CarBenchTask]]:
    """``<family>_<split>`` -> its tasks, for every task file present under ``root/tasks``."""
    out: dict[str, list[CarBenchTask]] = {}
    for family in FAMILIES:
        for split in SPLITS:
            rows = read_jsonl(task_file(root, family, split))
            if rows:
                out[f"{family}_{split}"] = [CarBenchTask.model_validate(r) for r in rows]
    return out
