"""Completion markers record each chunk file's rows and checksum; a file missing, truncated or changed since is
found (one line each), and the stage that wrote it recomputes it row-identically."""
from __future__ import annotations

import json

import pytest

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.storage.chunks import check, invalidate, verify
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
