"""`catalog.duckdb`: written with the store, current for any DuckDB client, rebuilt when its views change."""
from __future__ import annotations

import shutil
import subprocess
import sys

import duckdb

from evosyn.storage.catalog import CATALOG_FILE, write_catalog_file
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from tests.storage.samples import samples


def _external(path, sql: str):
    """What a DuckDB client outside EvoSyn sees: a plain read-only connection to the file."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_opening_a_store_writes_the_catalog_and_it_stays_current(home):
    store = Store(home)
    path = home / CATALOG_FILE
    assert path.exists()
    views = {v for (v,) in _external(path, "select view_name from duckdb_views() where not internal")}
    assert views == set(TABLES)
    for table in TABLES:  # empty but typed before any run
        assert _external(path, f'select count(*) from "{table}"') == [(0,)]
    for table, rec in samples().items():  # rows written after the catalog show up without a rewrite
        store.write([rec], "c1")
    for table in TABLES:
        assert _external(path, f'select count(*), min(run_id) from "{table}"') == [(1, "run-a")], table


def test_a_moved_root_gets_a_catalog_of_its_own_files(tmp_path):
    old = Store(tmp_path / "old")
    old.write([samples()["runs"]], "c1")
    shutil.copytree(old.root, tmp_path / "new")
    new = Store(tmp_path / "new")
    new.write([samples(run_id="run-b")["runs"]], "c1")
    got = _external(new.root / CATALOG_FILE, "select run_id from runs order by run_id")
    assert got == [("run-a",), ("run-b",)]
    assert _external(old.root / CATALOG_FILE, "select run_id from runs") == [("run-a",)]


def test_a_client_holding_the_catalog_open_does_not_block_a_rewrite(store):
    path = store.root / CATALOG_FILE
    reader = subprocess.Popen(
        [sys.executable, "-c", ("import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
                                "print(con.execute('select count(*) from runs').fetchone()[0], flush=True); "
                                "sys.stdin.read(); "
                                "print(con.execute('select count(*) from runs').fetchone()[0], flush=True)"),
         str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "0"
        store.write([samples()["runs"]], "c1")
        write_catalog_file(store)  # a rename: the reader keeps its file, new clients get the new one
        out, _ = reader.communicate("\n", timeout=60)
    finally:
        reader.kill()
    assert out.strip() == "1"  # its views are globs: it sees the new row too
    assert _external(path, "select count(*) from runs") == [(1,)]
    assert not [p.name for p in store.root.iterdir() if p.name.endswith((".tmp", ".wal"))]


ROW_TYPES = ("select 1 as a, 2 as a, 'x' as s, [1, 2] as l, [['a'], NULL] as ll, 1.5::float as f, "
             "2.25::decimal(10,3) d, DATE '2024-01-02' as dt, NULL as n, TIME '01:02:03' as tm, "
             "TIMESTAMP '2024-01-01 01:02:03.5' as ts, "
             "TIMESTAMPTZ '2024-01-01 01:02:03+02' as tz, true as b, 'abc'::blob as bl, 255::utinyint as u, "
             "-1::tinyint as t, 18446744073709551615::ubigint as ub, 2::smallint as sm, NULL::double as nd")
ARROW_TYPES = ("select 3::hugeint as h", "select {'a': 1} as s", "select INTERVAL 1 day as i",
               "select map([1], ['a']) as m", "select '00000000-0000-0000-0000-000000000000'::uuid as u")


def _arrow_rows(table):
    return list(zip(*(c.to_pylist() for c in table.columns)))


def test_query_rows_has_the_values_of_the_arrow_result(store):
    from evosyn.storage.catalog import query, query_rows

    store.write([samples()["verdicts"]], "c1")
    store.write([samples()["runs"]], "c1")
    for sql in (ROW_TYPES, *ARROW_TYPES, "select * from verdicts", "select * from runs", "select * from tasks",
                "select * from range(5)", "set enable_progress_bar = false"):
        want = query(sql, store)
        got = query_rows(sql, store)
        assert (got.columns, got.rows, got.num_rows) == (want.column_names, _arrow_rows(want), want.num_rows), sql
        assert [tuple(map(type, r)) for r in got.rows] == [tuple(map(type, r)) for r in _arrow_rows(want)], sql
    head = query_rows("select * from range(7) t(x)", store, limit=3)
    assert head.rows == [(0,), (1,), (2,)] and head.num_rows == 7


def test_a_read_only_query_in_a_fresh_process_and_a_type_only_arrow_converts(store):
    from evosyn.storage.catalog import query_rows

    store.write([samples()["verdicts"]], "c1")
    code = ("from evosyn.storage.store import Store; from evosyn.storage.catalog import query_rows; "
            f"print(query_rows('select count(*) as n from verdicts', Store({str(store.root)!r}, create=False)).rows)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["[(1,)]"]
    got = query_rows("select 3::hugeint as h", store).rows  # a type whose values only pyarrow gives (a Decimal)
    assert got == [(3,)] and type(got[0][0]).__name__ == "Decimal"
