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

import hashlib
import json
import types
import typing
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

import pyarrow as pa
from pydantic_core import from_json
from storage.canonical import STORED
from storage.records import Record

SCHEMA_FILE = "_schema.parquet"  # in each table's folder: its Arrow schema, so an empty table still has one

_SCALARS: dict[type, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """Arrow type of a field annotation and whether the column holds JSON."""
    annotation, _ = _strip_optional(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return pa.string(), False
    if origin is list and typing.get_args(annotation) == (str,):
        return pa.list_(pa.string()), False
    return pa.string(), True


@lru_cache(maxsize=None)
def derived_columns(model: type[Record]) -> tuple[tuple[str, str, str], ...]:
    """(column, field, key) of every typed column derived from a ``sliced`` field's key."""
    out = []
    for field, keys in model.sliced.items():
        if field not in model.model_fields:
            raise TypeError(f"{model.__name__}.sliced names {field!r}, which is not a field")
        for key in keys:
            column = f"{field}_{key}"
            if column in model.model_fields:
                raise TypeError(f"{model.__name__}: derived column {column!r} would hide the field of that name")
            out.append((column, field, key))
    return tuple(out)


@lru_cache(maxsize=None)
def schema_of(model: type[Record]) -> pa.Schema:
    fields = []
    for name, info in model.model_fields.items():
        dtype, is_json = arrow_type(info.annotation)
        meta = {b"json": b"1"} if is_json else None
        fields.append(pa.field(name, dtype, nullable=True, metadata=meta))
    for column, field, _ in derived_columns(model):
        fields.append(pa.field(column, pa.list_(pa.string()), nullable=True, metadata={b"derived": field.encode()}))
    return pa.schema(fields, metadata={b"evosyn_record": model.__name__.encode()})


@lru_cache(maxsize=None)
def schema_fingerprint(model: type[Record]) -> str:
    """A short hash of a table's Arrow schema (field metadata included): it names the table's schema file."""
    text = schema_of(model).to_string(show_field_metadata=True, show_schema_metadata=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
