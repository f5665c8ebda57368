"""tau2's ``Task`` behind ``evosyn.envs.base.EnvTask``; a generator's ``TaskDraft`` as a tau2 ``Task``.

The wrapped object is tau2's own, validated by tau2's model (``Tau2Task.tau2``), so
every task a tau2 pack stores is a valid tau2 task and tau2's evaluator can score it.
"""
from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Any

from evosyn.envs.base import EnvTask, Episode, GoldAction, TaskDraft, UserScenario


class Tau2Task(EnvTask):
    def __init__(self, task: Any, data: dict[str, Any] | None = None):
        self.tau2 = task  # tau2.data_model.tasks.Task
        self.id = task.id
        self._data = data  # the JSON it was read from, which the store keeps as it is

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tau2Task:
        from tau2.data_model.tasks import Task

        try:
            return cls(Task.model_validate(data), data)
        except Exception as exc:  # pydantic's error, as the ValueError the interface promises
            raise ValueError(f"not a valid tau2 task: {str(exc).splitlines()[0]}") from None

    @property
    def initial_state(self) -> Any:
        return self.tau2.initial_state

    @cached_property
    def scenario(self) -> UserScenario:
        ins = self.tau2.user_scenario.instructions
        if isinstance(ins, str):
            return UserScenario(reason_for_call=ins)
        # tau2's persona is not part of what our user simulators read (they never read it before a second
        # family existed), so it stays out of the scenario
        return UserScenario(**{k: getattr(ins, k, None) or "" for k in (
            "domain", "reason_for_call", "known_info", "unknown_info", "task_instructions")})

    @property
    def _criteria(self) -> Any:
        return self.tau2.evaluation_criteria

    @cached_property
    def gold_actions(self) -> list[GoldAction]:
        criteria = self._criteria
        return [GoldAction(name=a.name, arguments=dict(a.arguments), requestor=a.requestor, action_id=a.action_id,
                           compare_args=None if a.compare_args is None else tuple(a.compare_args))
                for a in ((criteria.actions or []) if criteria else [])]

    @property
    def communicate_info(self) -> list[str]:
        return list((self._criteria.communicate_info or []) if self._criteria else [])

    @cached_property
    def reward_basis(self) -> frozenset[str]:
        return frozenset(b.value for b in self._criteria.reward_basis) if self._criteria else frozenset()

    @property
    def evaluated(self) -> bool:
        return self._criteria is not None

    @property
    def state_checked(self) -> bool:
        criteria = self._criteria
        return criteria is not None and (criteria.actions is not None or criteria.env_assertions is not None)

    @property
    def purpose(self) -> str:
        return (self.tau2.description.purpose or "") if self.tau2.description else ""

    @property
    def setup(self) -> list[tuple[str, str, dict[str, Any]]]:
        state = self.tau2.initial_state
        return [(a.env_type.value if hasattr(a.env_type, "value") else str(a.env_type), a.func_name,
                 dict(a.arguments)) for a in ((state.initialization_actions or []) if state else [])]

    def failed_assertions(self, episode: Episode) -> list[str]:
        assertions = (self._criteria.env_assertions or []) if self._criteria else []
        return [a.func_name for a in assertions if not episode.check_assertion(a)]  # type: ignore[attr-defined]

    def to_json(self) -> dict[str, Any]:
        return self._data if self._data is not None else self.tau2.model_dump(mode="json", exclude_none=True)

    def key(self) -> str:
        return hashlib.sha256(self.tau2.model_dump_json(exclude_none=True).encode()).hexdigest()


def _gold_action(action: GoldAction) -> dict[str, Any]:
    out = {"action_id": action.action_id, "requestor": action.requestor, "name": action.name,
           "arguments": action.arguments}
    if action.compare_args is not None:
        out["compare_args"] = list(action.compare_args)
    return out


def draft_json(draft: TaskDraft) -> dict[str, Any]:
    """The draft as tau2 task JSON (what ``Task.model_validate`` reads)."""
    s = draft.scenario
    task: dict[str, Any] = {
        "id": draft.id,
        "description": {"purpose": draft.purpose, "relevant_policies": draft.relevant_policies, "notes": draft.notes},
        "user_scenario": {"instructions": {
            "domain": s.domain, "reason_for_call": s.reason_for_call, "known_info": s.known_info,
            "unknown_info": s.unknown_info, "task_instructions": s.task_instructions}},
        "ticket": draft.ticket,
        "evaluation_criteria": {
            "actions": [_gold_action(a) for a in draft.actions],
            "communicate_info": draft.communicate_info,
            **({"env_assertions": draft.assertions} if draft.assertions else {}),
            "reward_basis": draft.reward_basis},
    }
    if s.persona:
        task["user_scenario"]["persona"] = s.persona
    if draft.initial_state is not None:
        task["initial_state"] = draft.initial_state
    return task
