"""The store's table schemas as plain data: each column's name, Arrow type and role, and the fingerprint
that names a table's schema file (storage/store.py).

``describe`` derives a table's schema from its record (``storage.records``); ``storage.arrow`` builds
the Arrow schema from that description, so there is one mapping from fields to columns. The
description of every table is also kept as data, generated, in ``storage/table_schemas.py``: a
read-only command (`evosyn query`) builds its views from it without importing pydantic, the records
or pyarrow (0.35 s of a 0.8 s start-up). A store opened for writing checks that file against the
records (``check_generated``), and tests/storage/test_schemas.py does too; regenerate it with
``python -m storage.schemas`` after changing a record.

The fingerprint is the hash of the text pyarrow gives for the schema (``Schema.to_string`` with
field and schema metadata, as pyarrow 25 writes it), written here without pyarrow: the fingerprints
of stores written before stay the same, and a new pyarrow cannot change them.
"""
from __future__ import annotations

import hashlib
import json
import types
import typing
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

GENERATED = Path(__file__).with_name("table_schemas.py")

# Arrow's names of the column types (str() of the pyarrow type)
STRING, INT64, DOUBLE, BOOL = "string", "int64", "double", "bool"
TIMESTAMP = "timestamp[us, tz=UTC]"
STRING_LIST = "list<item: string>"

_SCALARS: dict[type, str] = {str: STRING, int: INT64, float: DOUBLE, bool: BOOL, datetime: TIMESTAMP}


class Column(NamedTuple):
    name: str
    type: str  # Arrow's name of the type, one of the names above
    json: bool = False  # holds the field's value as JSON text (dicts, sub-models, lists of them)
    derived: str = ""  # a typed column derived from this ``sliced`` field (storage/arrow.py)


class TableSchema(NamedTuple):
    record: str  # the record class's name, the schema's metadata
    columns: tuple[Column, ...]


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def column_type(annotation: Any) -> tuple[str, bool]:
    """Arrow type name of a field annotation and whether the column holds JSON."""
    annotation = _strip_optional(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return STRING, False
    if origin is list and typing.get_args(annotation) == (str,):
        return STRING_LIST, False
    return STRING, True


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
def describe(model: type) -> TableSchema:
    """The table schema of a record class: its fields in order, then the columns derived from its sliced fields."""
    columns = [Column(name, *column_type(info.annotation)) for name, info in model.model_fields.items()]
    columns += [Column(column, STRING_LIST, derived=field) for column, field, _ in derived_columns(model)]
    return TableSchema(model.__name__, tuple(columns))


def _arrow_text(schema: TableSchema) -> str:
    """``pa.Schema.to_string(show_field_metadata=True, show_schema_metadata=True)`` for these column types."""
    lines = []
    for c in schema.columns:
        lines.append(f"{c.name}: {c.type}")
        if c.type == STRING_LIST:
            lines.append("  child 0, item: string")
        if c.json:
            lines += ["  -- field metadata --", "  json: '1'"]
        if c.derived:
            lines += ["  -- field metadata --", f"  derived: '{c.derived}'"]
    lines += ["-- schema metadata --", f"evosyn_record: '{schema.record}'"]
    return "\n".join(lines)


@cache
def fingerprint(schema: TableSchema) -> str:
    """A short hash of a table's schema (field metadata included): it names the table's schema file."""
    return hashlib.sha256(_arrow_text(schema).encode()).hexdigest()[:16]


def _q(text: str) -> str:
    return json.dumps(text)  # a Python string literal too, in the double quotes of the rest of the code


def render(tables: dict[str, type]) -> str:
    """The source of storage/table_schemas.py for these record classes (``TABLES``)."""
    out = ['"""The schema of every store table, generated from storage/records.py by `python -m storage.schemas`:',
           'do not edit (storage/schemas.py says why it exists)."""',
           "from storage.schemas import Column as C",
           "from storage.schemas import TableSchema",
           "",
           "TABLE_SCHEMAS: dict[str, TableSchema] = {"]
    for name, model in tables.items():
        schema = describe(model)
        out.append(f"    {_q(name)}: TableSchema({_q(schema.record)}, (")
        for c in schema.columns:
            args = [_q(c.name), _q(c.type)] + (["json=True"] if c.json else []) + \
                   ([f"derived={_q(c.derived)}"] if c.derived else [])
            out.append(f"        C({', '.join(args)}),")
        out.append("    )),")
    out.append("}")
    return "\n".join(out) + "\n"


def stale_tables(generated: dict[str, TableSchema]) -> list[str]:
    """Tables whose generated schema (``TABLE_SCHEMAS``) is not the one their record describes now."""
    from storage.records import TABLES

    if list(TABLES) != list(generated):
        return sorted(set(TABLES) | set(generated))
    return [name for name, model in TABLES.items() if describe(model) != generated[name]]


def check_generated(generated: dict[str, TableSchema]) -> None:
    """Raise when storage/table_schemas.py no longer matches the records: readers would name the wrong schema files."""
    stale = stale_tables(generated)
    if stale:
        raise RuntimeError(f"{GENERATED} does not match storage/records.py for {', '.join(stale)}: "
                           "regenerate it with `python -m storage.schemas`")


def main() -> None:
    from storage.atomic import write_text
    from storage.records import TABLES

    write_text(GENERATED, render(TABLES))
    print(f"wrote {GENERATED}")


if __name__ == "__main__":
    main()
