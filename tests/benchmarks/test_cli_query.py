"""`evosyn bench query`: the benchmark store is real records through the store's writer, and its figures agree."""
import json
from collections import defaultdict

from evosyn.storage.store import RUN_DIRS, Store
from tests.flows.test_cli import evosyn


def test_bench_query_builds_reuses_and_agrees(tmp_path):
    target, root = tmp_path / "query.json", tmp_path / "bench-store"
    args = ("bench", "query", "--rows", "2400", "--runs", "8", "--rounds", "2", "--repeat", "1",
            "--store", str(root), "--output", str(target))
    out = evosyn(*args, home=tmp_path)
    assert out.returncode in (0, 1), out.stderr  # 1: a time target missed on a busy machine
    data = json.loads(target.read_text())
    assert data["rows"] == 2400 and data["build_s"] > 0 and data["slices_agree"]
    assert data["one_run_rows"] == 2 * 2400 // 16  # one run: its two rounds
    assert set(data["timings"]) >= {"one run", "slice (typed column)", '`evosyn query "select 1"`'}
    records = Store(root).read_records("evaluations")  # the figures are those of the records written
    by = defaultdict(list)
    for e in records:
        by[e.observed["num_write"][0]].append(e.success)
    assert {s["num_write"]: (s["n"], round(s["success"], 9)) for s in data["slices"]} == \
        {k: (len(v), round(sum(v) / len(v), 9)) for k, v in by.items()}
    assert {p.parent.name for p in root.glob(f"tables/evaluations/{RUN_DIRS}/round=*/*.parquet")} == {"round=0", "round=1"}
    again = evosyn(*args, home=tmp_path)
    assert again.returncode in (0, 1), again.stderr
    assert json.loads(target.read_text())["build_s"] == 0  # the same store, reused
