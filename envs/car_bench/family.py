"""A CAR-bench task as the core reads it (``evosyn.envs.base.EnvTask``), and a generator's draft as a CAR-bench task.

``CarTaskView`` is the mixin ``tasks.CarBenchTask`` takes: the user's side is the
task's persona and instruction, the gold actions are its tool actions (the ones
that talk to the user are CAR-bench's own bookkeeping), the stored JSON is the
dataset's row (``to_row``). ``task_row`` writes a ``TaskDraft`` as such a row:
the draft's ``initial_state`` is a ``CarInitialState`` (or its dict) and its
``extra`` carries the row's own fields (``task_type``, the disambiguation
elements, ``removed_part``).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evosyn.envs.base import EnvTask, Episode, GoldAction, TaskDraft, UserScenario

# CAR-bench's reward components (envs/car_bench/reward.py); a hallucination task is scored on the last two only
COMPONENTS = frozenset({"state", "tool_subset", "policy", "tool_execution", "user_end"})
HALLUCINATION_COMPONENTS = frozenset({"tool_execution", "user_end"})
ROW_EXTRAS = ("task_type", "disambiguation_element_internal", "disambiguation_element_user",
              "disambiguation_element_note")


class CarTaskView(EnvTask):
    """``EnvTask`` over a CAR-bench task's fields (``instruction``, ``persona``, ``tool_actions``, ``to_row``)."""

    @property
    def scenario(self) -> UserScenario:
        return UserScenario(reason_for_call=self.instruction, persona=self.persona,  # type: ignore[attr-defined]
                            domain="car_bench")

    @property
    def gold_actions(self) -> list[GoldAction]:
        """The tool actions a correct agent performs: on a hallucination task, not the ones that need what the
        task removed (CAR-bench's gold trajectory leaves them out too)."""
        return [GoldAction(name=a.name, arguments=dict(a.kwargs), action_id="" if a.index is None else str(a.index))
                for a in self.tool_actions  # type: ignore[attr-defined]
                if not uses_removed_part(self, a.name, a.kwargs)]

    @property
    def communicate_info(self) -> list[str]:
        return []  # CAR-bench checks no told facts

    @property
    def reward_basis(self) -> frozenset[str]:
        return HALLUCINATION_COMPONENTS if self.is_hallucination else COMPONENTS  # type: ignore[attr-defined]

    @property
    def evaluated(self) -> bool:
        return True

    @property
    def state_checked(self) -> bool:
        return True  # our strict check: the final state is the gold replay's, whatever the task type

    @property
    def purpose(self) -> str:
        return f"CAR-bench {self.task_type} task"  # type: ignore[attr-defined]

    def failed_assertions(self, episode: Episode) -> list[str]:
        return []  # CAR-bench states no assertions beside the state comparison



def task_row(draft: TaskDraft) -> dict[str, Any]:
    """The draft as a row of CAR-bench's task files."""
    init = draft.initial_state
    init = init.model_dump() if hasattr(init, "model_dump") else dict(init or {})
    s = draft.scenario
    instruction = " ".join(p for p in (s.reason_for_call, s.known_info, s.task_instructions) if p)
    removed = init.get("removed_part") or draft.extra.get("removed_part")
    return {"task_id": draft.id, "persona": s.persona, "calendar_id": init.get("calendar_id", ""),
            "instruction": instruction, "context_init_config": json.dumps(init.get("context_init_config") or {}),
            "actions": json.dumps([{"name": a.name, "kwargs": a.arguments, "index": n,
                                    "dependent_on_action_index": None} for n, a in enumerate(draft.actions)]),
            **{k: draft.extra[k] for k in ROW_EXTRAS if draft.extra.get(k) is not None},
            "removed_part": json.dumps(list(removed)) if removed else None}


def uses_removed_part(task: Any, name: str, kwargs: Mapping[str, Any]) -> bool:
    """Whether a call needs a tool or parameter the hallucination task (its ``removed_part``) removed."""
    for part in task.removed_part or []:
        path = part.split(".")
        if path[0] == name and (len(path) == 1 or path[1] in kwargs):
            return True
    return False
