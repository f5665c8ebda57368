"""Canonical forms at the record boundary: what a field holds from construction on is what a store round
trip gives back (``evosyn.storage.records`` builds its fields from these)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationInfo
from pydantic_core import from_json, to_json

# A record must equal itself read back from the store, so every field holds, from
# construction on, the value a store round trip gives back: free-form JSON as
# JSON's own data model (tuples and sets as lists, non-string keys as strings,
# datetimes as ISO strings, NaN and Infinity as null; key order kept), timestamps as aware UTC (a naive
# one is taken as UTC; the store keeps microseconds).
def _canonical_json(value: Any, info: ValidationInfo) -> Any:
    if info.context is STORED:  # parsed from the store's own JSON text: canonical already
        return value
    return from_json(to_json(value, inf_nan_mode="null"))  # JSON has no NaN / Infinity


# Validation context of rows read back from the store (storage.arrow.from_rows): their free-form JSON
# was written in canonical form, so it is not put through it again (an eighth of a read's time).
STORED: dict[str, bool] = {"stored": True}


def _utc(value: datetime) -> datetime:
    utc = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    return utc.replace(fold=0)  # fold means nothing in UTC, and Arrow does not keep it


JSONObject = Annotated[dict[str, Any], AfterValidator(_canonical_json)]
UTCDatetime = Annotated[datetime, AfterValidator(_utc)]
