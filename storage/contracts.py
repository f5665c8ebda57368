"""The bases of every store record: strict pydantic contracts, and the lineage ids a table row carries.

``evosyn.storage.records`` holds the records of the round's stages, ``evosyn.storage.audit_records`` those that audit them (model
calls, copies); both build on these.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


class Contract(BaseModel):
    """Base for nested value objects: strict, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=False)


# The verifier's observed factors (envs/factors.py ``observe``). A record's ``sliced`` fields store each of
# these keys again as a typed column of its own, ``<field>_<key>`` (list<string>, NULL when the key is
# absent), beside the JSON of the whole dict: slicing by a factor then reads one small column instead of
# parsing a million JSON strings (``evosyn bench query``).
OBSERVED_FACTORS: tuple[str, ...] = (
    "num_write", "num_read", "trajectory_pattern", "tool_use_pattern", "state_change_type", "computation",
    "expected_outcome", "task_family", "policy_or_constraint_focus",
    # the trajectory properties (envs/properties.py)
    "entities_touched", "multi_item", "money_moves", "policy_gated", "search_calls", "distinct_tools", "write_mix",
    "interleaved", "user_actions",
)


class Record(Contract):
    """Base for a row of a store table, with lineage ids."""

    table: ClassVar[str] = ""
    # dict[str, list[str]] fields whose listed keys are also stored as typed columns (storage/arrow.py)
    sliced: ClassVar[dict[str, tuple[str, ...]]] = {}

    run_id: str = Field(description="the run (or synthesis pass, or test set) the row belongs to")
    round: int = Field(ge=0, description="the round (0: before the first round, e.g. a test set's build)")
    space_version: int = Field(default=0, ge=0, description="the version of the synthesis space the row was made under")
    direction_id: str | None = Field(default=None, description="the Designer direction the row descends from")
    blueprint_id: str | None = Field(default=None, description="the Planner blueprint the row descends from")
