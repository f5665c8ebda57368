"""storage/schemas.py: every table's Arrow schema, built with pyarrow's API from its record, is the one the store
has always written (fixtures/table_schemas.json: pyarrow's text of each schema and its fingerprint, recorded
from the code before the schemas were built this way); a change would rename every store's schema files."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from evosyn.storage.records import TABLES, Record
from evosyn.storage.schemas import (
    derived_columns,
    derived_from,
    json_columns,
    schema_fingerprint,
    schema_of,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "table_schemas.json").read_text())


def test_the_same_tables_in_the_same_order():
    assert list(TABLES) == list(FIXTURE)


@pytest.mark.parametrize("table", list(FIXTURE))
def test_each_tables_schema_and_fingerprint_are_unchanged(table):
    model, want = TABLES[table], FIXTURE[table]
    schema = schema_of(model)
    assert schema.to_string(show_field_metadata=True, show_schema_metadata=True).splitlines() == want["schema"]
    assert schema_fingerprint(model) == want["fingerprint"]
    assert schema.metadata == {b"evosyn_record": want["record"].encode()}


def test_json_and_derived_columns_are_marked_in_the_field_metadata():
    from evosyn.storage.records import Verdict

    schema = schema_of(Verdict)
    assert json_columns(Verdict) == {f.name for f in schema if f.metadata and f.metadata.get(b"json") == b"1"}
    assert "checks" in json_columns(Verdict) and "run_id" not in json_columns(Verdict)
    derived = {f.name: derived_from(f) for f in schema if derived_from(f)}
    assert derived == {column: field for column, field, _ in derived_columns(Verdict)} and derived
    assert all(schema.field(c).type == pa.list_(pa.string()) for c in derived)


def test_a_sliced_key_that_would_hide_a_field_is_refused():
    class Bad(Record):
        sliced = {"observed": ("x",)}
        observed: dict[str, list[str]] = {}
        observed_x: str = ""

    with pytest.raises(TypeError, match="observed_x"):
        schema_of(Bad)
