import os

import pytest

from evosyn.storage.catalog import connect, query, write_catalog_file
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from tests.storage.samples import samples


@pytest.mark.parametrize("table", sorted(TABLES))
def test_round_trip_parquet_and_duckdb(store, table):
    rec = samples()[table]
    store.write([rec], chunk_id="c0")
    back = store.read_records(table)
    assert back == [rec]
    # the DuckDB view returns the same row
    rows = query(f'select * from "{table}"', store).to_pylist()
    from evosyn.storage.arrow import from_rows

    assert from_rows(rows, TABLES[table]) == [rec]
    assert store.read(table).height == 1


@pytest.mark.parametrize("table", sorted(TABLES))
def test_a_chunk_reads_as_pyarrow_reads_it_and_read_fields_is_the_records_fields(store, table):
    import pyarrow.parquet as pq

    rec = samples()[table]
    store.write([rec], chunk_id="c0")
    (path,) = store.files(table)
    assert pq.ParquetFile(path).read().to_pylist() == pq.read_table(path).to_pylist()  # what _read relies on
    fields = list(TABLES[table].model_fields)
    assert store.read_fields(table, fields) == [rec.model_dump(mode="python")]
    with pytest.raises(KeyError, match="no field nope"):
        store.read_fields(table, ["nope"])


def test_empty_tables_query_as_zero_rows(tmp_path):
    fresh = Store(tmp_path / "never-written", create=False)
    for table in TABLES:
        assert query(f'select count(*) as n from "{table}"', fresh).to_pylist() == [{"n": 0}]
    assert not (tmp_path / "never-written").exists()  # querying wrote nothing


def test_rewriting_a_chunk_leaves_one_copy(store):
    rec = samples()["verdicts"]
    store.write([rec], "chunk-1")
    store.write([rec], "chunk-1")
    assert store.count("verdicts") == 1
    store.write([rec.model_copy(update={"verdict_id": "v2"})], "chunk-2")
    assert store.count("verdicts") == 2


def test_interrupted_write_leaves_no_partial_file(store, monkeypatch):
    good = samples()["tasks"]
    store.write([good], "c1")
    import pyarrow.parquet as pq

    real = pq.write_table

    def explode(table, where, **kw):
        real(table.slice(0, 0), where, **kw)  # something lands on disk, then the write dies
        raise RuntimeError("killed mid-write")

    monkeypatch.setattr(pq, "write_table", explode)
    with pytest.raises(RuntimeError):
        store.write([good.model_copy(update={"task_id": "t2"})], "c2")
    monkeypatch.setattr(pq, "write_table", real)
    part = store.partition_dir("tasks", good.run_id, good.round)
    assert sorted(os.listdir(part)) == ["c1.parquet"]
    assert [r.task_id for r in store.read_records("tasks")] == ["t1"]


def test_where_keeps_only_the_rows_it_passes_and_parses_only_those(store, monkeypatch):
    import evosyn.storage.arrow as A  # the store imports from_rows from it where it reads

    base = samples()["tasks"]
    store.write([base.model_copy(update={"task_id": f"t{i}"}) for i in range(4)], "c")
    parsed = []
    real = A.from_rows
    monkeypatch.setattr(A, "from_rows", lambda rows, model: parsed.extend(rows := list(rows)) or real(rows, model))
    kept = store.read_records("tasks", where=lambda row: row["task_id"] in {"t1", "t3"})
    assert [t.task_id for t in kept] == ["t1", "t3"] and [r["task_id"] for r in parsed] == ["t1", "t3"]
    assert kept == [t for t in store.read_records("tasks") if t.task_id in {"t1", "t3"}]


def test_two_runs_in_one_root_stay_separate(store):
    a = samples(run_id="run-a")["evaluations"]
    b = samples(run_id="run-b")["evaluations"]
    store.write([a], "c")
    store.write([b], "c")
    assert store.read("evaluations", run_id="run-a")["run_id"].to_list() == ["run-a"]
    assert store.read("evaluations", run_id="run-b")["run_id"].to_list() == ["run-b"]
    assert store.count("evaluations") == 2
    assert store.runs() == [] and set(os.listdir(store.table_dir("evaluations"))) >= {"run_id=run-a", "run_id=run-b"}


def test_records_split_by_round_into_partitions(store):
    recs = [samples(round=r)["trajectories"] for r in (1, 2)]
    store.write(recs, "c")
    assert store.count("trajectories", round=1) == 1 and store.count("trajectories", round=2) == 1


def test_unsafe_ids_are_refused(store):
    with pytest.raises(ValueError, match="run_id"):
        store.write([samples(run_id="../escape")["runs"]], "c")
    with pytest.raises(ValueError, match="chunk_id"):
        store.write([samples()["runs"]], "a/b")


def test_catalog_file_has_a_view_per_table(store):
    import duckdb

    store.write([samples()["verdicts"]], "c")
    path = write_catalog_file(store)
    con = duckdb.connect(str(path), read_only=True)
    views = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    assert views == set(TABLES)
    assert con.execute("select count(*) from verdicts").fetchone() == (1,)
    assert con.execute("select count(*) from probes").fetchone() == (0,)
    con.close()


def test_connect_disables_extension_autoinstall(store):
    con = connect(store)
    assert con.execute("select current_setting('autoinstall_known_extensions')").fetchone() == (False,)
