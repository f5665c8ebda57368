"""Table digests: equal for the same content, different for any changed value, key order or duplicate."""
from __future__ import annotations

from evosyn.storage.digest import normalized_rows, table_digests
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from tests.storage.samples import samples


def fill(root, run_id="run-a", **changes):
    store = Store(root)
    for table, rec in samples(run_id=run_id).items():
        store.write([rec.model_copy(update=changes.get(table, {}))], "c0")
    return store


def test_same_content_same_digest_whatever_the_time_or_the_run_id(tmp_path):
    a = table_digests(fill(tmp_path / "a"), "run-a")
    later = {"runs": {"created_at": samples()["runs"].created_at.replace(year=2030)},
             "llm_calls": {"latency_s": 9.0}}
    assert table_digests(fill(tmp_path / "b", **later), "run-a") == a
    assert table_digests(fill(tmp_path / "c", run_id="run-b"), "run-b") == a
    assert set(a) == set(TABLES)


def test_a_changed_value_key_order_or_duplicate_changes_one_digest(tmp_path):
    a = table_digests(fill(tmp_path / "a"), "run-a")
    task = samples()["tasks"]
    flipped = {"tasks": {"tau2_task": dict(reversed(list(task.tau2_task.items())))}}
    b = table_digests(fill(tmp_path / "b", **flipped), "run-a")
    assert [t for t in a if a[t] != b[t]] == ["tasks"]
    c = table_digests(fill(tmp_path / "c", verdicts={"reward": 0.5}), "run-a")
    assert [t for t in a if a[t] != c[t]] == ["verdicts"]
    store = fill(tmp_path / "d")
    store.write([samples()["probes"]], "c1")  # the same row twice
    d = table_digests(store, "run-a")
    assert [t for t in a if a[t] != d[t]] == ["probes"]
    assert len(normalized_rows(store, "probes", "run-a")) == 2


def test_the_store_path_in_a_stored_config_is_not_content(tmp_path):
    def with_root(root):
        store = Store(root)
        store.write([samples()["runs"].model_copy(update={"config_json": f'{{"store": {{"root": "{root}"}}}}'})],
                    "c0")
        return table_digests(store, "run-a")["runs"]

    assert with_root(tmp_path / "one") == with_root(tmp_path / "two")
