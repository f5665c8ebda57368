"""`evosyn query` runs a person's SQL with reads of the store's tables only: no file outside the store read or
written, nothing written into it, no database attached, no extension installed, its settings locked
(DuckDB's enable_external_access, allowed_directories and lock_configuration); `--unsafe-full-access` opts out."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from evosyn.storage.catalog import connect_sandboxed, query
from evosyn.storage.store import Store
from tests.storage.samples import samples


def evosyn(*args, home, env=None):
    env = {**os.environ, "EVOSYN_HOME": str(home), **(env or {})}
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def one_error_line(out) -> str:
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout, out.stderr)
    (line,) = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert line.startswith("error: SQL: ") and "--unsafe-full-access" in line
    return line


@pytest.fixture
def filled(store):
    for rec in samples().values():
        store.write([rec], "c1")
    return store


def _partition(store: Store) -> str:
    return str(store.table_dir("tasks") / "run_id=run-a" / "round=1")


# each: the SQL (formatted with {out}: a folder outside the store, {part}: a partition folder of `tasks`, {home}:
# the store root), and the file it must not create
REFUSED = {
    "copy out": ("COPY (select 'x' as evil) TO '{out}/evil.csv'", "{out}/evil.csv"),
    "copy into the store": ("COPY (select 'x' as evil) TO '{part}/evil.parquet' (FORMAT parquet)",
                            "{part}/evil.parquet"),
    "attach out": ("ATTACH '{out}/x.duckdb' AS x", "{out}/x.duckdb"),
    "attach in the store": ("ATTACH '{part}/x.duckdb' AS x", "{part}/x.duckdb"),
    "export": ("EXPORT DATABASE '{out}/dump'", "{out}/dump"),
    "explain analyze copy": ("EXPLAIN ANALYZE COPY (select 1) TO '{out}/e.csv'", "{out}/e.csv"),
    "after a read": ("select 1; COPY (select 1) TO '{out}/two.csv'", "{out}/two.csv"),
    "unlocked first": ("SET enable_external_access = true; COPY (select 1) TO '{out}/u.csv'", "{out}/u.csv"),
    "install": ("INSTALL httpfs", "{out}/.duckdb"),  # HOME is {out}: DuckDB's extension folder stays unmade
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_write_an_attach_or_an_install_is_one_error_line_and_writes_nothing(filled, tmp_path, case):
    out_dir = tmp_path / "outside"
    out_dir.mkdir()
    where = {"out": out_dir, "part": _partition(filled), "home": filled.root}
    sql, target = (s.format(**where) for s in REFUSED[case])
    before = sorted(p for p in filled.root.rglob("*") if "catalog" not in p.name)
    one_error_line(evosyn("query", sql, home=filled.root, env={"HOME": str(out_dir)}))
    assert not os.path.exists(target)
    assert sorted(p for p in filled.root.rglob("*") if "catalog" not in p.name) == before
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize("reader", ["read_csv('{f}')", "read_text('{f}')", "read_parquet('{f}')",
                                    "read_csv('{tables}/../../secret.csv')", "glob('{out}/*')"])
def test_a_read_outside_the_store_is_one_error_line(filled, tmp_path, reader):
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nhunter2\n")
    sql = f"select * from {reader}".format(f=secret, tables=filled.tables_dir, out=tmp_path)
    line = one_error_line(evosyn("query", sql, home=filled.root))
    assert "hunter2" not in line and "Permission" in line


def test_the_store_tables_still_read_and_the_opt_out_has_full_access(filled, tmp_path):
    out = evosyn("query", "select task_id from tasks", "--format", "json", home=filled.root)
    assert out.returncode == 0 and json.loads(out.stdout) == {"task_id": samples()["tasks"].task_id}
    # a read of the tables' files by path, and an in-memory table of the query's own
    sql = (f"create table t as select count(*) as n from read_parquet('{filled.table_dir('tasks')}/*/*/*.parquet');"
           " select n from t")
    out = evosyn("query", sql, "--format", "json", home=filled.root)
    assert out.returncode == 0 and json.loads(out.stdout) == {"n": 1}

    target = tmp_path / "export.csv"
    out = evosyn("query", f"COPY (select task_id from tasks) TO '{target}'", "--unsafe-full-access",
                 home=filled.root)
    assert out.returncode == 0, out.stderr
    assert target.read_text().split() == ["task_id", samples()["tasks"].task_id]


def test_a_sandboxed_connection_is_locked_and_the_internal_one_is_not(filled, tmp_path):
    con = connect_sandboxed(filled)
    try:
        settings = dict(con.execute("select name, value from duckdb_settings() where name in "
                                    "('enable_external_access', 'lock_configuration')").fetchall())
        assert settings == {"enable_external_access": "false", "lock_configuration": "true"}
        with pytest.raises(duckdb.Error):
            con.execute("SET lock_configuration = false")
    finally:
        con.close()
    # our own queries (reports, `evosyn runs`) keep the process's database of views, untouched by a sandbox
    assert query("select current_setting('enable_external_access') as on", filled).to_pylist() == [{"on": True}]
    with pytest.raises(duckdb.PermissionException):
        query(f"COPY (select 1) TO '{tmp_path / 'x.csv'}'", filled, sandboxed=True)
    assert not (tmp_path / "x.csv").exists()


def test_an_s3_store_stays_queryable_and_locked(s3_root, tmp_path):
    st = Store(s3_root)
    for rec in samples().values():
        st.write([rec], "c1")
    out = evosyn("query", "select task_id from tasks", "--format", "json", home=s3_root)
    assert out.returncode == 0 and json.loads(out.stdout) == {"task_id": samples()["tasks"].task_id}, out.stderr
    one_error_line(evosyn("query", f"COPY (select 1) TO '{tmp_path / 'x.csv'}'", home=s3_root))
    assert not (tmp_path / "x.csv").exists()
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nhunter2\n")
    assert "hunter2" not in one_error_line(evosyn("query", f"select * from read_csv('{secret}')", home=s3_root))
