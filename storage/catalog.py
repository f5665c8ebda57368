"""DuckDB catalog: one view per store table over its Parquet files.

``catalog.duckdb`` under the store root holds the views for any DuckDB client; it is written
when a store is opened for writing (`Store(root)`), and stays current by itself because each view
reads a glob of its table's files. It is rebuilt only when the view definitions change (a new
table, a moved root: the globs are absolute paths). ``connect`` builds the same views on an
in-memory connection for our own queries, so reading never writes and never waits on a lock.

A view reads its table hive-partitioned, so a filter on ``run_id`` / ``round`` opens only the
matching partitions' files, through a glob of fixed depth (DuckDB walks the folders of a recursive
``**`` glob twice, of ``*/*/*.parquet`` once), and without ``union_by_name``: every
file has the record's schema (the store migrates older files when it is opened for writing;
storage/store.py), so DuckDB reads one footer for the schema instead of all of them. A store not
yet migrated (opened read-only by newer code) gets a fallback view: by column name, every partition
opened, the derived columns computed from the JSON they come from, so the same queries run, only
slower.

A store on S3 (storage/objectstore.py) has no catalog file: DuckDB reads S3 only through its httpfs extension,
and no build of it for the DuckDB this project pins can be installed from a package registry (its own
downloads are off: ``autoinstall_known_extensions``). ``connect`` lists each table's objects instead and
registers them as a pyarrow dataset over s3fs: the same views, bound to the objects of the moment of the
connection, read by pyarrow (with DuckDB's filters and column selection pushed down into the scan).

SQL a person wrote (`evosyn query`) runs on ``connect_sandboxed``: the same views in a database of its own that
reads the store's tables and nothing else, writes nothing, and cannot change that (DuckDB's access settings, and
its parser's statement types for writes); our own queries keep ``connect``.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import duckdb
import pyarrow as pa

from evosyn.storage.faults import fault_zone
from evosyn.storage.records import TABLES
from evosyn.storage.schemas import derived_from, schema_of

if TYPE_CHECKING:  # a Store opens (and keeps current) its catalog: this module only receives one
    from evosyn.storage.store import Store

CATALOG_FILE = "catalog.duckdb"
DUCKDB_CONFIG = {"autoinstall_known_extensions": False}


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _glob(store: Store, table: str, depth: str = "**") -> str:
    """Every Parquet file of a table, at any depth (``**``), or at the partitions' depth (``*/*``: every file of
    the current layout, storage/store.py; DuckDB walks its folders once, a ``**`` glob's twice)."""
    return _sql_str(str((store.table_dir(table) / depth / "*.parquet").resolve()))


def _view_sql(store: Store, table: str) -> str | None:
    """The view over a table whose files all have the current schema; None when they may not."""
    if not store.has_current_schema(table):
        return None
    return (f'CREATE OR REPLACE VIEW "{table}" AS SELECT * FROM read_parquet({_glob(store, table, "*/*")}, '
            "hive_partitioning=true, hive_types={'run_id': VARCHAR, 'round': BIGINT}, union_by_name=false)")


# DuckDB's names of the column types storage/schemas.py uses, for the typed NULLs of a view over older files
_DUCK_TYPES = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
               pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ", pa.list_(pa.string()): "VARCHAR[]"}


def _fallback_sql(con: duckdb.DuckDBPyConnection, store: Store, table: str) -> str | None:
    """A view over files of older schemas, by column name, shaped like the current schema."""
    base = store.table_dir(table)
    if not any(base.glob("**/*.parquet")):
        return None
    read = f"read_parquet({_glob(store, table)}, hive_partitioning=false, union_by_name=true)"
    have = {name for name, *_ in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()}
    select = []
    for c in schema_of(TABLES[table]):
        derived = derived_from(c)
        if derived and c.name not in have:
            key = c.name.removeprefix(f"{derived}_")  # the sliced key it is derived from (storage/schemas.py)
            select.append(f"CAST(json_extract({derived}, {_sql_str('$.' + key)}) AS VARCHAR[]) AS \"{c.name}\"")
        elif c.name in have:
            select.append(f'"{c.name}"')
        else:
            select.append(f'CAST(NULL AS {_DUCK_TYPES[c.type]}) AS "{c.name}"')
    return f'CREATE OR REPLACE VIEW "{table}" AS SELECT {", ".join(select)} FROM {read}'


def _empty_sql(table: str) -> str:
    # plain SQL, not a registered Arrow table: registering makes DuckDB import pandas (0.3 s of start-up)
    cols = ", ".join(f'CAST(NULL AS {_DUCK_TYPES[c.type]}) AS "{c.name}"' for c in schema_of(TABLES[table]))
    return f'CREATE OR REPLACE VIEW "{table}" AS SELECT {cols} LIMIT 0'


def _forms(store: Store) -> tuple[str, ...]:
    """Which kind of view each table gets now: over current files, a fallback over older ones, or empty."""
    return tuple("current" if store.has_current_schema(t) else
                 "fallback" if any(store.table_dir(t).glob("**/*.parquet")) else "empty" for t in TABLES)


def attach_views(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    for table in TABLES:  # a root nobody wrote to yet: a typed, empty relation
        con.execute(_view_sql(store, table) or _fallback_sql(con, store, table) or _empty_sql(table))


# One in-memory database per store root, process and kind of views: opening a DuckDB database costs
# about 14 ms of CPU and its 13 views 9 ms more, more than a query of one run. Each `connect` is a
# cursor of it (its own connection to the same views; closing it leaves the database open). The views
# are globs, bound again at each query, so files written since are read; a migration changes the key.
_databases: dict[tuple, duckdb.DuckDBPyConnection] = {}
_databases_lock = threading.Lock()


def connect(store: Store) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with a view per table (in memory, extension auto-install off)."""
    if store.remote:
        return _connect_remote(store)
    key = (os.getpid(), str(store.root.resolve()), _forms(store))
    with _databases_lock:
        db = _databases.get(key)
        if db is None:
            db = duckdb.connect(":memory:", config=DUCKDB_CONFIG)
            attach_views(db, store)
            # views of another kind for this root, or a parent's (inherited by a fork): forgotten, not
            # closed, since a cursor of it may be running a query (the database goes with its last cursor)
            for old in [k for k in _databases if k[:2] == key[:2] or k[0] != key[0]]:
                del _databases[old]
            _databases[key] = db
        return db.cursor()


def _connect_remote(store: Store) -> duckdb.DuckDBPyConnection:
    """A connection whose views are the tables' objects now, as pyarrow datasets (never cached: the views are
    lists of objects, and a later connection must see the chunks written since)."""
    import pyarrow.dataset as ds

    con = duckdb.connect(":memory:", config=DUCKDB_CONFIG)
    for table in TABLES:
        files = [f.path for f in store.files(table)]
        if not files:
            con.execute(_empty_sql(table))
            continue
        con.register(table, ds.dataset(files, schema=schema_of(TABLES[table]), format="parquet",
                                       filesystem=store.tables_dir.fs))
    return con


# A person's SQL (`evosyn query`) runs in a database of its own, locked down with DuckDB's access settings: files
# under the store's tables folder only (allowed_directories; none for an S3 store, whose views DuckDB scans as
# registered pyarrow datasets), no other file, URL, extension or replacement scan (enable_external_access off),
# and neither changeable by the SQL (lock_configuration). DuckDB lets a statement write wherever it may read (COPY
# ... TO, ATTACH and EXPORT into the allowed folder: DuckDB 2.0.1), so writes are refused by statement type (DuckDB's
# parser) before anything runs: reads, and what changes only that in-memory database (a view, a macro, a variable).
_READ_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "CREATE", "PRAGMA", "CALL", "SET", "VARIABLE_SET", "MULTI"})
_EXPLAIN = re.compile(r"\s*EXPLAIN\s+(ANALY[SZ]E\s+|\([^)]*\)\s*)?", re.IGNORECASE)  # EXPLAIN ANALYZE runs it


def connect_sandboxed(store: Store) -> duckdb.DuckDBPyConnection:
    """A connection for SQL a person wrote: the views of ``connect``, in a database of its own (never cached)
    that reads the store's tables and nothing else, with its settings locked. Run statements through
    ``check_reads_only`` first: the settings alone let a write into the tables folder through."""
    if store.remote:
        con, allowed = _connect_remote(store), []
    else:
        con = duckdb.connect(":memory:", config=DUCKDB_CONFIG)
        attach_views(con, store)
        allowed = [str(store.tables_dir.resolve()) + os.sep]
    try:
        con.execute("SET allowed_directories = ?", [allowed])  # before external access goes off: DuckDB's order
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def check_reads_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise duckdb.PermissionException, before any of it runs, for SQL with a statement that writes or attaches
    (COPY, ATTACH, EXPORT, INSTALL / LOAD, INSERT, ...); parse errors are DuckDB's own (duckdb.Error)."""
    for statement in con.extract_statements(sql):
        kind = statement.type.name
        if kind == "EXPLAIN":
            explained = _EXPLAIN.match(statement.query)
            if explained:
                check_reads_only(con, statement.query[explained.end():])
                continue
        elif kind in _READ_STATEMENTS:
            continue
        word = re.match(r"\s*([A-Za-z]+)", statement.query)  # INSTALL, not its type LOAD
        raise duckdb.PermissionException(f"{word.group(1).upper() if word else kind} is refused: "
                                         "only reads of the store's tables run")


def _catalog_views(store: Store) -> dict[str, str]:
    store._ensure_schema_files()  # every table has a file, so every view is a glob over its folder
    return {table: _view_sql(store, table) for table in TABLES}


def _fingerprint(sql: str) -> str:
    return "evosyn view " + hashlib.sha256(sql.encode()).hexdigest()[:16]


def _views_in(path: Path) -> dict[str, str] | None:
    """The (view, comment) pairs of a catalog file; None when it is missing or unreadable."""
    if not path.exists():
        return None
    try:
        con = duckdb.connect(str(path), read_only=True, config=DUCKDB_CONFIG)
    except duckdb.Error:  # corrupt, or held read-write by another client: rebuilt by a rename
        return None
    try:
        rows = con.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal").fetchall()
    finally:
        con.close()
    return dict(rows)


def catalog_readable(path: Path) -> bool:
    """Whether a catalog file opens and lists its views (`evosyn store check`)."""
    return _views_in(path) is not None


def write_catalog_file(store: Store) -> Path:
    """Persist the views in ``<root>/catalog.duckdb`` for external DuckDB clients.

    Built in a temporary file and renamed over the old one, so a client never opens a half-written
    catalog and one that holds the old file open keeps reading it.
    """
    views = _catalog_views(store)
    path = store.root / CATALOG_FILE
    tmp = store.root / f".{CATALOG_FILE}.{uuid.uuid4().hex}.tmp"
    try:
        with fault_zone("catalog-init"):  # a fault test's kill or full disk while the file is built
            _build_catalog(tmp, views)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        for left in (tmp, Path(f"{tmp}.wal")):
            left.unlink(missing_ok=True)
    return path


def _build_catalog(tmp: Path, views: dict[str, str]) -> None:
    con = duckdb.connect(str(tmp), config=DUCKDB_CONFIG)
    try:
        for table, sql in views.items():
            con.execute(sql)
            con.execute(f'COMMENT ON VIEW "{table}" IS {_sql_str(_fingerprint(sql))}')
        con.execute("CHECKPOINT")
    finally:
        con.close()


_checked: set[Path] = set()  # catalog files this process found current


def ensure_catalog_file(store: Store) -> Path:
    """Write ``catalog.duckdb`` unless it already holds these views (checked once per process)."""
    path = store.root / CATALOG_FILE
    key = path.resolve()
    if key in _checked and path.exists():
        return path
    want = {t: _fingerprint(sql) for t, sql in _catalog_views(store).items()}
    if _views_in(path) != want:
        from evosyn.storage.locks import store_lock

        with store_lock(store.root, "catalog"):  # concurrent first runs: one writes, the others find it
            if _views_in(path) != want:
                write_catalog_file(store)
    _checked.add(key)
    return path


def _open(store: Store, sql: str, sandboxed: bool) -> duckdb.DuckDBPyConnection:
    if not sandboxed:
        return connect(store)
    con = connect_sandboxed(store)
    try:
        check_reads_only(con, sql)
    except BaseException:
        con.close()
        raise
    return con


def query(sql: str, store: Store, *, sandboxed: bool = False) -> pa.Table:
    """Run SQL against the catalog; returns a pyarrow Table. Raises duckdb.Error on bad SQL.

    ``sandboxed``: SQL a person wrote (`evosyn query`): it reads the store's tables only (``connect_sandboxed``),
    a statement that would write or read anything else raises duckdb.PermissionException."""
    con = _open(store, sql, sandboxed)
    try:
        rel = con.sql(sql)
        if rel is None:  # a statement without a result (e.g. SET)
            return pa.table({})
        return rel.to_arrow_table()
    finally:
        con.close()


class Rows(NamedTuple):
    """A query's result as Python values: its column names, its first rows and how many rows it has."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    num_rows: int


def arrow_rows(table: pa.Table, limit: int | None = None) -> Rows:
    """The first ``limit`` rows of an Arrow table (all: None), by position (a name may repeat in a result)."""
    head = table if limit is None else table.slice(0, limit)
    return Rows(table.column_names, list(zip(*(c.to_pylist() for c in head.columns))), table.num_rows)


# DuckDB types whose Python values (fetchall) are the ones pyarrow's to_pylist gives for the same result, and lists
# of them (tests/storage/test_catalog.py); others (HUGEINT: an int, not a Decimal; INTERVAL, MAP, UUID, STRUCT, ...)
# go through Arrow. Checked before the query runs, from the relation's types.
_SAME_AS_ARROW = re.compile(r'(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|FLOAT|'
                            r'DOUBLE|DECIMAL\(\d+,\d+\)|VARCHAR|BLOB|DATE|TIME|TIMESTAMP|TIMESTAMP WITH TIME ZONE|'
                            r'"NULL")(\[\])*')


def query_rows(sql: str, store: Store, limit: int | None = None, *, sandboxed: bool = False) -> Rows:
    """Run SQL against the catalog; its first ``limit`` rows (all: None) with the values ``query(...).to_pylist()``
    holds. Raises duckdb.Error on bad SQL; ``sandboxed`` as in ``query``.

    Fetched by DuckDB's own conversion when every column's type converts as pyarrow's does (no Arrow table is
    built for them); through Arrow for a result with a column of another type.
    """
    con = _open(store, sql, sandboxed)
    try:
        rel = con.sql(sql)
        if rel is None:  # a statement without a result (e.g. SET)
            return Rows([], [], 0)
        if not all(_SAME_AS_ARROW.fullmatch(str(t)) for t in rel.types):
            return arrow_rows(rel.to_arrow_table(), limit)
        if limit is None:
            rows = rel.fetchall()
            return Rows(list(rel.columns), rows, len(rows))
        held = rel.materialize()  # run once: the rows shown and the count come from the same run
        return Rows(list(rel.columns), held.limit(limit).fetchall(), len(held))
    finally:
        con.close()
