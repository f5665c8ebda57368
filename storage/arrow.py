"""Pydantic record <-> Arrow schema and rows.

Scalars map to native Arrow types, ``list[str]`` to ``list<string>`` (queryable
with DuckDB list functions) and everything nested (dicts, sub-models, lists of
sub-models) to a JSON string column, so the schema of a table never depends on
the data written to it. The keys a record declares in ``sliced`` (the observed
factors) are stored once more as typed ``list<string>`` columns of their own
(``observed_num_write``, ...), derived from the dict at write time and ignored
when rows are read back into records.
"""
from __future__ import annotations

import json
import typing
from functools import lru_cache
from typing import Any

import pyarrow as pa
from pydantic_core import from_json
from storage.canonical import STORED
from storage.records import Record
from storage.schemas import (BOOL, DOUBLE, INT64, STRING, STRING_LIST, TIMESTAMP, derived_columns,
                             describe, fingerprint)

# storage/schemas.py names each column's type as Arrow does (tests/storage/test_schemas.py checks the names)
ARROW_TYPES: dict[str, pa.DataType] = {
    STRING: pa.string(), INT64: pa.int64(), DOUBLE: pa.float64(), BOOL: pa.bool_(),
    TIMESTAMP: pa.timestamp("us", tz="UTC"), STRING_LIST: pa.list_(pa.string()),
}


@lru_cache(maxsize=None)
def schema_of(model: type[Record]) -> pa.Schema:
    fields = []
    for c in describe(model).columns:
        meta = {b"json": b"1"} if c.json else {b"derived": c.derived.encode()} if c.derived else None
        fields.append(pa.field(c.name, ARROW_TYPES[c.type], nullable=True, metadata=meta))
    return pa.schema(fields, metadata={b"evosyn_record": model.__name__.encode()})


def schema_fingerprint(model: type[Record]) -> str:
    """A short hash of a table's Arrow schema (field metadata included): it names the table's schema file."""
    return fingerprint(describe(model))


@lru_cache(maxsize=None)
def json_columns(model: type[Record]) -> frozenset[str]:
    return frozenset(f.name for f in schema_of(model) if f.metadata and f.metadata.get(b"json"))


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
