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
