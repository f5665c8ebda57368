"""`evosyn store check [--repair]`: one line per broken chunk file, exit 1; --repair leaves no marker vouching for a
broken file and the next pass recomputes it row-identically; a root that is whole says ok."""
from __future__ import annotations

from click.testing import CliRunner

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.flows.cli import main
from evosyn.storage.store import Store
from evosyn.tasks import stages
from evosyn.envs.packs import get_domain


def _check(root, *args):
    return CliRunner().invoke(main, ["--home", str(root), "store", "check", *args])


def test_store_check_names_a_broken_chunk_and_repair_leaves_it_to_be_recomputed(tmp_path):
    root = tmp_path / "home"
    ctx = stages.Ctx(Store(root), "chk", 1, 0, get_domain("airline"))
    space = load_initial_space(get_pack("airline"), run_id="chk")
    blueprints = stages.plan(ctx, space, stages.design(ctx, space, ColdStart(), 6, "evosyn"))
    tasks = stages.generate(ctx, space, blueprints)
    assert _check(root).exit_code == 0
    path = ctx.store.partition_dir("tasks", "chk", 1) / f"{stages.chunk_name('gen', blueprints)}.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    out = _check(root)
    assert out.exit_code == 1 and out.stdout.splitlines() == [
        f"run chk round 1: {path}: its bytes do not match the checksum its marker records"]
    out = _check(root, "--repair")  # no `runs` row to resume: invalidated, recomputed by the next pass
    assert out.exit_code == 0 and "repaired: 1 problem(s)" in out.stdout and "chk" in out.stdout
    assert not path.exists() and _check(root).exit_code == 0
    assert [t.model_dump() for t in stages.generate(ctx, space, blueprints)] == [t.model_dump() for t in tasks]
    assert path.exists() and _check(root).stdout.startswith("ok:")


def _test_set(root):
    """A small uniform test set built in ``root``: (store, its run id, sha256 of each of its files)."""
    import hashlib

    from evosyn.tasks.testset import build_test_set, test_set_run_id

    st = Store(root)
    env = get_domain("airline")
    build_test_set(st, env, 4, 1, "uniform")
    run_id = test_set_run_id(env, 1, 4, "uniform")
    files = {p.relative_to(st.tables_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in st.tables_dir.glob(f"*/run_id={run_id}/round=0/*.parquet")}
    return st, run_id, files


def test_a_repaired_test_set_chunk_comes_back_row_identical(tmp_path):
    import hashlib

    root = tmp_path / "home"
    st, run_id, files = _test_set(root)
    path = min(st.partition_dir("tasks", run_id, 0).glob("gen-*.parquet"))
    path.write_bytes(path.read_bytes()[:100])  # truncated
    out = _check(root, "--repair")
    assert out.exit_code == 0, out.output
    assert f"rebuilt test set {run_id}: row-identical" in out.stdout
    now = {p.relative_to(st.tables_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
           for p in st.tables_dir.glob(f"*/run_id={run_id}/round=0/*.parquet")}
    assert now == files
    assert _check(root).stdout.startswith("ok:")


def test_a_test_set_chunk_that_cannot_come_back_as_it_was_fails_in_one_line(tmp_path):
    """The rebuilt chunk is not what its marker recorded (as when the generator changed since the set was built):
    exit 1, one error line naming the set and the file."""
    import json

    root = tmp_path / "home"
    st, run_id, _ = _test_set(root)
    marker = min(st.markers_dir.glob(f"run_id={run_id}/round=0/generate.gen-*.done"))
    info = json.loads(marker.read_text())
    (name,) = info["files"]
    info["files"][name]["sha256"] = "0" * 64  # what an earlier generator wrote
    marker.write_text(json.dumps(info))
    out = _check(root, "--repair")
    assert out.exit_code == 1
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"test set {run_id}" in errors[0] and name in errors[0], out.output
    assert "Traceback" not in out.output
