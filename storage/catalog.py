"""DuckDB catalog: one view per store table over its Parquet files.

``catalog.duckdb`` under the store root holds the views for any DuckDB client;
``connect`` builds the same views on an in-memory connection for our own
queries, so reading never writes and never waits on a lock.
"""
from __future__ import annotations

from pathlib import Path

import duckdb

from storage.arrow import schema_of
from storage.records import TABLES
from storage.store import SCHEMA_FILE, Store

CATALOG_FILE = "catalog.duckdb"
DUCKDB_CONFIG = {"autoinstall_known_extensions": False}


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _view_sql(store: Store, table: str) -> str | None:
    base = store.table_dir(table)
    if not (base / SCHEMA_FILE).exists() and not any(base.glob("run_id=*/round=*/*.parquet")):
        return None
    glob = str((base / "**" / "*.parquet").resolve())
    return (f'CREATE OR REPLACE VIEW "{table}" AS SELECT * FROM read_parquet({_sql_str(glob)}, '
            "hive_partitioning=false, union_by_name=true)")


def attach_views(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    for table, model in TABLES.items():
        sql = _view_sql(store, table)
        if sql is None:  # a root nobody wrote to yet: a typed, empty relation
            con.register(f"_empty_{table}", schema_of(model).empty_table())
            sql = f'CREATE OR REPLACE VIEW "{table}" AS SELECT * FROM "_empty_{table}"'
        con.execute(sql)


def connect(store: Store | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with a view per table (extension auto-install off)."""
    store = store or Store(create=False)
    con = duckdb.connect(":memory:", config=DUCKDB_CONFIG)
    attach_views(con, store)
    return con


def write_catalog_file(store: Store) -> Path:
    """Persist the views in ``<root>/catalog.duckdb`` for external DuckDB clients."""
    store._ensure_schema_files()
    path = store.root / CATALOG_FILE
    con = duckdb.connect(str(path), config=DUCKDB_CONFIG)
    try:
        for table in TABLES:
            con.execute(_view_sql(store, table))
    finally:
        con.close()
    return path


def query(sql: str, store: Store | None = None):
    """Run SQL against the catalog; returns a pyarrow Table. Raises duckdb.Error on bad SQL."""
    con = connect(store)
    try:
        rel = con.sql(sql)
        if rel is None:  # a statement without a result (e.g. SET)
            import pyarrow as pa

            return pa.table({})
        return rel.to_arrow_table()
    finally:
        con.close()
