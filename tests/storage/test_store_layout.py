"""The store's layout for DuckDB: partition pruning, typed columns of the observed factors, old stores."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evosyn.storage.arrow import derived_columns, schema_of, to_table
from evosyn.storage.catalog import query
from evosyn.storage.digest import table_digests
from evosyn.storage.records import OBSERVED_FACTORS, TABLES, Evaluation, Verdict
from evosyn.storage.store import OLD_SCHEMA_DIR, SCHEMA_DIR, SCHEMA_FILE, Store
from tests.storage.samples import samples


def _evaluation(run_id: str, i: int, **observed) -> Evaluation:
    return Evaluation(run_id=run_id, round=1, evaluation_id=f"e{i}", task_id=f"t{i}", trajectory_id=f"tr{i}",
                      model_version="m1", task_set="test", success=i % 2 == 0, reward=float(i % 2 == 0),
                      observed=observed)


def test_observed_factors_are_typed_columns(store):
    store.write([_evaluation("run-a", 0, num_write=["1"], tool_use_pattern=["lookup", "batch"]),
                 _evaluation("run-a", 1, num_write=["3-4"])], "c1")
    rows = query("select evaluation_id, observed_num_write, observed_tool_use_pattern, observed_num_read "
                 "from evaluations order by 1", store).to_pylist()
    assert rows == [{"evaluation_id": "e0", "observed_num_write": ["1"], "observed_tool_use_pattern": ["lookup", "batch"],
                     "observed_num_read": None},
                    {"evaluation_id": "e1", "observed_num_write": ["3-4"], "observed_tool_use_pattern": None,
                     "observed_num_read": None}]
    # the JSON column is unchanged, so queries written against it still run
    got = query("select json_extract_string(observed, '$.num_write[0]') as v from evaluations order by 1", store)
    assert got.column("v").to_pylist() == ["1", "3-4"]
    assert {c for c, _, _ in derived_columns(Verdict)} == {f"observed_{k}" for k in OBSERVED_FACTORS}
    assert schema_of(Evaluation).field("observed_num_write").type == pa.list_(pa.string())


def test_a_filter_on_the_run_opens_only_its_partitions(store):
    for rid in ("run-a", "run-b"):
        store.write([_evaluation(rid, i, num_write=["1"]) for i in range(3)], "c1")
    (other,) = store.files("evaluations", run_id="run-b")
    other.write_bytes(b"not a parquet file")  # any read of run-b's partition now fails
    assert query("select count(*) as n from evaluations where run_id = 'run-a'", store).to_pylist() == [{"n": 3}]
    with pytest.raises(duckdb.Error):
        query("select count(*) from evaluations", store)


def test_partition_values_keep_their_types(store):
    store.write([samples(run_id="123")["runs"]], "c1")
    got = query("select run_id, typeof(run_id) as t, typeof(round) as r from runs", store).to_pylist()
    assert got == [{"run_id": "123", "t": "VARCHAR", "r": "BIGINT"}]


def _write_old_layout(root, records_by_table) -> None:
    """A store as the code before typed columns wrote it: no derived columns, a root schema file."""
    for table, records in records_by_table.items():
        model = TABLES[table]
        old = pa.schema([f for f in schema_of(model) if f.name not in {c for c, _, _ in derived_columns(model)}
                         and f.name != "repair_reason"])  # and a field added since: filled by its default
        base = root / "tables" / table
        base.mkdir(parents=True, exist_ok=True)
        pq.write_table(old.empty_table(), base / SCHEMA_FILE)
        part = base / f"run_id={records[0].run_id}" / f"round={records[0].round}"
        part.mkdir(parents=True)
        pq.write_table(to_table(records, model).select(old.names), part / "c1.parquet")


def test_an_old_store_reads_as_it_is_and_is_migrated_when_opened_for_writing(tmp_path):
    root = tmp_path / "old"
    verdict = samples()["verdicts"].model_copy(update={"observed": {"num_write": ["2"], "num_read": ["0"]}})
    originals = {"verdicts": [verdict], "runs": [samples()["runs"]]}
    _write_old_layout(root, originals)
    before = {p: p.read_bytes() for p in (root / "tables").rglob("*.parquet")}

    reader = Store(root, create=False)  # reading: fallback views, nothing written
    got = query("select verdict_id, repair_reason, observed_num_write, observed_computation, "
                "json_extract_string(observed, '$.num_read[0]') as num_read from verdicts", reader).to_pylist()
    assert got == [{"verdict_id": verdict.verdict_id, "repair_reason": None, "observed_num_write": ["2"],
                    "observed_computation": None, "num_read": "0"}]
    assert {p: p.read_bytes() for p in (root / "tables").rglob("*.parquet")} == before
    digests = table_digests(reader, "run-a")

    store = Store(root)  # writing: every file rewritten in the current schema, through its records
    for table in TABLES:
        assert store.has_current_schema(table)
        assert not (store.table_dir(table) / SCHEMA_FILE).exists()
        for path in store.files(table):
            assert pq.read_schema(path).equals(schema_of(TABLES[table]), check_metadata=False)
    assert store.read_records("verdicts") == [verdict.model_copy(update={"repair_reason": ""})]
    assert table_digests(store, "run-a") == digests
    assert query("select observed_num_write from verdicts", store).to_pylist() == [{"observed_num_write": ["2"]}]
    again = {p: p.read_bytes() for p in (root / "tables").rglob("*.parquet")}
    Store(root)  # migrated once: a second open rewrites nothing
    assert {p: p.read_bytes() for p in (root / "tables").rglob("*.parquet")} == again


def test_schema_files_sit_at_the_partitions_depth_and_no_listing_of_runs_shows_them(store):
    store.write([_evaluation("run-a", i, num_write=["1"]) for i in range(2)], "c1")
    schema_file = store.schema_path("evaluations")
    assert schema_file.parent == store.table_dir("evaluations") / SCHEMA_DIR
    assert len(schema_file.relative_to(store.table_dir("evaluations")).parts) == 3  # run_id=/round=0/<fp>.parquet
    assert schema_file not in store.files("evaluations") and schema_file not in store.files("evaluations", round=0)
    store.write([samples(run_id="run-a")["runs"]], "c1")
    assert store.runs() == ["run-a"]
    assert query("select count(*) as n, count(distinct run_id) as runs from evaluations", store).to_pylist() == \
        [{"n": 2, "runs": 1}]


def test_a_store_of_the_previous_schema_folder_moves_it_without_rewriting_data(tmp_path):
    root = tmp_path / "prev"
    store = Store(root)
    store.write([_evaluation("run-a", i, num_write=["2"]) for i in range(3)], "c1")
    for table in TABLES:  # as the layout before: the schema file one folder deeper, under _schema/
        current = store.schema_path(table)
        (store.table_dir(table) / OLD_SCHEMA_DIR).mkdir(parents=True)
        current.rename(store.table_dir(table) / OLD_SCHEMA_DIR / current.name)
        current.parent.rmdir()
        current.parent.parent.rmdir()
    # a rewritten file is a new file (``_atomic_write`` renames a temp file over it): another inode
    data = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in store.files("evaluations")}
    reader = Store(root, create=False)  # reading: fallback views over the old folder, nothing moved
    assert query("select count(*) as n from evaluations", reader).to_pylist() == [{"n": 3}]
    assert not reader.has_current_schema("evaluations")

    moved = Store(root)
    for table in TABLES:
        assert moved.has_current_schema(table)
        assert not (moved.table_dir(table) / "_schema").exists()
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in moved.files("evaluations")} == data
    assert query("select count(*) as n from evaluations where run_id = 'run-a'", moved).to_pylist() == [{"n": 3}]


def test_every_factor_the_verifier_observes_has_its_typed_column():
    """OBSERVED_FACTORS (storage) names what envs/factors.py observes: a new factor there needs its column here."""
    from evosyn.envs.factors import observe
    from evosyn.envs.gold import gold_messages
    from evosyn.envs.packs import default_domain, get_domain
    from evosyn.envs.replay import replay

    domain = get_domain(default_domain())
    task = next(t for t in domain.tasks("base") if t.gold_actions)
    msgs = gold_messages(domain, task)
    assert set(observe(domain.pack, replay(domain, task.initial_state, msgs), msgs)) == set(OBSERVED_FACTORS)
