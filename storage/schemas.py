"""The Arrow schema of every store table, built with pyarrow from its record (storage/records.py).

Scalars map to native Arrow types, ``list[str]`` to ``list<string>`` (queryable with DuckDB list
functions) and everything nested (dicts, sub-models, lists of sub-models) to a string column of JSON,
marked ``json`` in the field's metadata, so a table's schema never depends on the data written to it.
The keys a record declares in ``sliced`` (the observed factors) are stored once more as typed
``list<string>`` columns of their own (``observed_num_write``, ...), marked ``derived`` with the field
they come from. The schema's metadata names the record class.

A table's fingerprint, the hash of pyarrow's text of its schema (metadata included), names its schema
file in the store (storage/store.py); tests/storage/test_schemas.py holds every table's schema text and
fingerprint as they were first written, so a change of a record or of pyarrow that would rename them
fails there.
"""
from __future__ import annotations

import hashlib
import types
import typing
from datetime import datetime
from functools import cache
from typing import Any, Literal

import pyarrow as pa

STRING_LIST = pa.list_(pa.string())
_SCALARS: dict[type, pa.DataType] = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
                                     datetime: pa.timestamp("us", tz="UTC")}
JSON, DERIVED, RECORD = b"json", b"derived", b"evosyn_record"  # the metadata keys


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def column_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """The Arrow type of a field annotation and whether the column holds JSON."""
    annotation = _strip_optional(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return pa.string(), False
    if origin is list and typing.get_args(annotation) == (str,):
        return STRING_LIST, False
    return pa.string(), True


@cache
def derived_columns(model: type) -> tuple[tuple[str, str, str], ...]:
    """(column, field, key) of every typed column derived from a ``sliced`` field's key of a record class."""
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


@cache
def schema_of(model: type) -> pa.Schema:
    """The table schema of a record class: its fields in order, then the columns derived from its sliced fields."""
    fields = []
    for name, info in model.model_fields.items():
        arrow_type, is_json = column_type(info.annotation)
        fields.append(pa.field(name, arrow_type, metadata={JSON: b"1"} if is_json else None))
    fields += [pa.field(column, STRING_LIST, metadata={DERIVED: field.encode()})
               for column, field, _ in derived_columns(model)]
    return pa.schema(fields, metadata={RECORD: model.__name__.encode()})


def derived_from(field: pa.Field) -> str | None:
    """The sliced field a derived column comes from; None for a column of the record's own."""
    return field.metadata[DERIVED].decode() if field.metadata and DERIVED in field.metadata else None


@cache
def json_columns(model: type) -> frozenset[str]:
    return frozenset(f.name for f in schema_of(model) if f.metadata and f.metadata.get(JSON))


@cache
def schema_fingerprint(model: type) -> str:
    """A short hash of a table's Arrow schema (field metadata included): it names the table's schema file."""
    text = schema_of(model).to_string(show_field_metadata=True, show_schema_metadata=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
