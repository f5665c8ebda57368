"""Completion markers record each chunk file's rows and checksum; a file missing, truncated or changed since is
found (one line each), and the stage that wrote it recomputes it row-identically."""
from __future__ import annotations

import json

import pytest

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.storage.chunks import check, check_root, invalidate, quarantine, verify
from evosyn.storage.store import Store, StoreFault
from evosyn.tasks import stages
from evosyn.envs.packs import get_domain


@pytest.fixture
def generated(tmp_path):
    """One generate chunk of an embedded pass: (ctx, space, blueprints, tasks, the chunk name)."""
    ctx = stages.Ctx(Store(tmp_path / "home"), "chk", 1, 0, get_domain("airline"))
    space = load_initial_space(get_pack("airline"), run_id="chk")
    blueprints = stages.plan(ctx, space, stages.design(ctx, space, ColdStart(), 6, "evosyn"))
    tasks = stages.generate(ctx, space, blueprints)
    return ctx, space, blueprints, tasks, stages.chunk_name("gen", blueprints)


def _damage(path, how):
    if how == "deleted":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # corrupted: same size, one byte in the middle changed
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


def test_a_marker_records_each_file_of_its_chunk(generated):
    ctx, _, _, tasks, chunk = generated
    info = json.loads(ctx.store.marker_path("generate", "chk", 1, chunk).read_text())
    assert info["files"][f"tasks/{chunk}.parquet"]["rows"] == len(tasks)
    assert len(info["files"][f"tasks/{chunk}.parquet"]["sha256"]) == 64
    assert not any(name.startswith("llm_calls/") for name in info["files"])
    assert verify(ctx.store, ctx.store.marker_path("generate", "chk", 1, chunk)) == []


@pytest.mark.parametrize("how,said", [("deleted", "missing"), ("truncated", "truncated"),
                                      ("corrupted", "checksum")])
def test_a_damaged_chunk_is_named_in_one_line_and_recomputed_row_identically(generated, how, said):
    ctx, space, blueprints, tasks, chunk = generated
    path = ctx.store.partition_dir("tasks", "chk", 1) / f"{chunk}.parquet"
    _damage(path, how)
    problems = check(ctx.store)
    assert [p.path for p in problems] == [path]
    assert said in problems[0].line() and "\n" not in problems[0].line() and "run chk round 1" in problems[0].line()
    assert not ctx.done("generate", chunk)  # a resume redoes it
    again = stages.generate(ctx, space, blueprints)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in tasks]
    assert [t.model_dump() for t in ctx.store.read_chunk("tasks", "chk", 1, chunk)] == [t.model_dump() for t in tasks]
    assert check(ctx.store) == []


def test_an_unreadable_file_no_marker_names_is_found_and_its_owner_invalidated(generated):
    ctx, _, _, _, chunk = generated
    marker = ctx.store.marker_path("generate", "chk", 1, chunk)
    info = json.loads(marker.read_text())
    del info["files"]  # a marker written before markers recorded their files
    marker.write_text(json.dumps(info))
    path = ctx.store.partition_dir("tasks", "chk", 1) / f"{chunk}.parquet"
    _damage(path, "truncated")
    (problem,) = check(ctx.store)
    assert problem.path == path and problem.markers == (marker,)
    with pytest.raises(StoreFault, match="unreadable chunk file"):  # a read names it in one line
        ctx.store.read_records("tasks", run_id="chk")
    assert invalidate([problem]) == [marker, path] and not marker.exists() and not path.exists()


def _plant(path, sql="select 'x' as evil"):
    """A Parquet file written beside the chunks, as `evosyn query "COPY (...) TO ..."` would."""
    import duckdb

    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.sql(f"COPY ({sql}) TO '{path}' (FORMAT parquet)")
    return path


def test_a_file_no_marker_vouches_for_is_reported_and_repair_moves_it_out_of_the_tables(generated):
    ctx, _, _, tasks, _ = generated
    store = ctx.store
    planted = _plant(store.partition_dir("tasks", "chk", 1) / "evil.parquet")
    stray = _plant(store.table_dir("tasks") / "stray" / "deep" / "x.parquet")  # matched by a query's */*/* glob
    with pytest.raises(Exception, match="evil|task_id|schema"):  # a query of the table meets it
        store.read("tasks")
    problems = check(store)
    assert sorted(p.path for p in problems) == sorted([planted, stray])
    line = next(p.line() for p in problems if p.path == planted)
    assert line.startswith("run chk round 1: ") and "no completion marker vouches for it" in line
    assert "not the tasks table's" in line and "\n" not in line
    moved = quarantine(store, problems)
    assert not planted.exists() and not stray.exists()
    assert [m.relative_to(store.root).parts[0] for m in moved] == ["quarantine", "quarantine"]
    assert check(store) == [] and len(store.read("tasks")) == len(tasks)


def test_a_chunk_file_of_the_table_s_schema_without_a_marker_is_named_too(generated):
    ctx, _, _, _, chunk = generated
    store = ctx.store
    copy = store.partition_dir("tasks", "chk", 1) / "gen-copied.parquet"
    copy.write_bytes((store.partition_dir("tasks", "chk", 1) / f"{chunk}.parquet").read_bytes())
    (problem,) = check(store)
    assert problem.path == copy and "no completion marker vouches for it" in problem.line()
    assert "not the tasks table's" not in problem.line()


def test_files_written_without_a_marker_by_design_are_not_flagged(generated):
    """A run's own row and initial space, and what `evosyn evaluate` writes outside a run's loop, have no marker;
    a file planted under such a name with other columns is still found."""
    from evosyn.storage.records import Run

    ctx, space, _, _, _ = generated
    store = ctx.store
    store.write([Run(run_id="chk", round=0, domain="airline", arm="evosyn", backend="embedded", seed=0, rounds=1,
                     budget=6, config_json="{}")], "run")
    store.write([space.model_copy(update={"run_id": "chk", "round": 0})], "initial")
    assert check(store) == []
    planted = _plant(store.partition_dir("spaces", "chk", 3) / "initial.parquet")
    (problem,) = check(store)
    assert problem.path == planted and "not the spaces table's" in problem.line()


def test_a_run_in_progress_is_not_flagged_while_it_holds_its_lock(generated):
    import subprocess
    import sys

    ctx, _, _, _, chunk = generated
    store = ctx.store
    unmarked = store.partition_dir("tasks", "chk", 1) / f"{chunk}-later.parquet"
    unmarked.write_bytes((store.partition_dir("tasks", "chk", 1) / f"{chunk}.parquet").read_bytes())
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom evosyn.storage.locks import store_lock\n"
        f"with store_lock({str(store.root)!r}, 'run-chk'):\n    print('held', flush=True)\n    time.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        found = check_root(store)
        assert found.problems == [] and found.in_progress == {"chk": [unmarked]}
    finally:
        holder.kill()
        holder.wait()
    (problem,) = check(store)  # the holder is gone: a stage that never wrote its marker
    assert problem.path == unmarked
