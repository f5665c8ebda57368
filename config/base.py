"""What every section of the run configuration shares."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A part of the run configuration: an unknown field is refused, so a misspelt key is one error line at config
    time instead of a setting silently left at its default; so is a number that is not finite (``.inf``, ``.nan``
    in YAML), which no duration, count, weight or price can be."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
