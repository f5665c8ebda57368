"""`catalog.duckdb`: written with the store, current for any DuckDB client, rebuilt when its views change."""
from __future__ import annotations

import shutil
import subprocess
import sys

import duckdb

from storage.catalog import CATALOG_FILE, write_catalog_file
from storage.records import TABLES
from storage.store import Store
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
