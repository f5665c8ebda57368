"""Pydantic record <-> Arrow schema and rows.

Each table's schema comes from storage/schemas.py. JSON columns are written as
text and parsed back; the columns derived from a ``sliced`` field's keys are
filled from the dict at write time and ignored when rows are read back into
records.
"""
from __future__ import annotations

import json
import typing
from typing import Any

import pyarrow as pa
from pydantic_core import from_json

from evosyn.storage.canonical import STORED
from evosyn.storage.records import Record
from evosyn.storage.schemas import derived_columns, json_columns, schema_fingerprint, schema_of

# the schemas are built in storage/schemas.py; the store and the benchmarks take them from here with the rows
__all__ = ["derived_columns", "from_rows", "json_columns", "loads_json", "schema_fingerprint", "schema_of",
           "to_table"]


def _dump(value: Any) -> str:
    # Key order is part of the value (tool-call arguments render into dialogue text), so it is kept;
    # a value JSON cannot hold fails here, loudly, instead of being stored as its str().
    return json.dumps(value, separators=(",", ":"))


def to_table(records: typing.Sequence[Record], model: type[Record]) -> pa.Table:
    schema = schema_of(model)
    jcols = json_columns(model)
    derived = derived_columns(model)
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    fields = list(model.model_fields)
    for rec in records:
        if type(rec) is not model:
            raise TypeError(f"expected {model.__name__} records, got {type(rec).__name__}")
        row = rec.model_dump(mode="python", exclude=jcols)
        if jcols:
            row.update({k: _dump(v) for k, v in rec.model_dump(mode="json", include=jcols).items()})
        for name in fields:
            columns[name].append(row[name])
        for column, field, key in derived:
            columns[column].append(getattr(rec, field).get(key))
    return pa.table(columns, schema=schema)


def loads_json(text: str) -> Any:
    """``json.loads``, by pydantic-core's parser (2.5x faster, same values); json's for what it refuses
    (a lone surrogate escape, which json.dumps writes for a str holding one)."""
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)


def from_rows(rows: typing.Iterable[dict[str, Any]], model: type[Record]) -> list[Record]:
    jcols = json_columns(model)
    fields = model.model_fields
    out = []
    for row in rows:
        data = {k: (loads_json(v) if k in jcols and v is not None else v) for k, v in row.items() if k in fields}
        out.append(model.model_validate(data, context=STORED))
    return out
