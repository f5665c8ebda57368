"""storage/schemas.py: the tables' schemas as data, the same fingerprints as pyarrow's text of the schema."""
from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from storage import schemas
from storage.arrow import ARROW_TYPES, schema_fingerprint, schema_of
from storage.records import TABLES
from storage.table_schemas import TABLE_SCHEMAS


def _pyarrow_fingerprint(schema: pa.Schema) -> str:
    """How the fingerprint was computed before storage/schemas.py: stores on disk are named by it."""
    text = schema.to_string(show_field_metadata=True, show_schema_metadata=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("table", list(TABLES))
def test_fingerprint_without_pyarrow_is_pyarrows(table):
    model = TABLES[table]
    assert schemas.fingerprint(TABLE_SCHEMAS[table]) == _pyarrow_fingerprint(schema_of(model))
    assert schema_fingerprint(model) == _pyarrow_fingerprint(schema_of(model))


def test_the_generated_file_is_current():
    assert schemas.stale_tables(TABLE_SCHEMAS) == []
    assert schemas.GENERATED.read_text() == schemas.render(TABLES)
    schemas.check_generated(TABLE_SCHEMAS)


def test_type_names_are_arrows_own():
    assert {name: str(t) for name, t in ARROW_TYPES.items()} == {name: name for name in ARROW_TYPES}


def test_arrow_schema_is_built_from_the_description():
    for table, model in TABLES.items():
        schema = schema_of(model)
        cols = TABLE_SCHEMAS[table].columns
        assert schema.names == [c.name for c in cols]
        assert [str(f.type) for f in schema] == [c.type for c in cols]
        assert [f.name for f in schema if f.metadata and f.metadata.get(b"json")] == [c.name for c in cols if c.json]
        assert {f.name: f.metadata[b"derived"].decode() for f in schema if f.metadata and b"derived" in f.metadata} \
            == {c.name: c.derived for c in cols if c.derived}


def test_a_stale_generated_file_stops_a_store_opened_for_writing(tmp_path, monkeypatch):
    from storage.store import Store, _check_table_schemas

    runs = TABLE_SCHEMAS["runs"]
    monkeypatch.setitem(TABLE_SCHEMAS, "runs", runs._replace(columns=runs.columns[:-1]))
    _check_table_schemas.cache_clear()
    try:
        assert schemas.stale_tables(TABLE_SCHEMAS) == ["runs"]
        with pytest.raises(RuntimeError, match=r"runs: regenerate it with `python -m storage.schemas`"):
            Store(tmp_path / "h")
        assert not (tmp_path / "h").exists()
    finally:
        _check_table_schemas.cache_clear()
