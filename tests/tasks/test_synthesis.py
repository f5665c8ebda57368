"""One synthesis pass in-process (``evosyn synth``, the test set): the round's stages, chunks and resume."""
from __future__ import annotations

import pytest

import evosyn.tasks.stages as stages
from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.tasks.synthesis import PassConflict, run_pass, summary
from evosyn.storage.digest import table_digests
from evosyn.storage.store import Store
from evosyn.envs.packs import get_domain

RUN = "synth-t"


def _pass(root, budget=14, seed=3, chunk_size=5, **kw):
    ctx = stages.Ctx(Store(root), RUN, 0, seed, get_domain("airline"))
    return run_pass(ctx, load_initial_space(get_pack("airline"), run_id=RUN), ColdStart(), budget, chunk_size=chunk_size, **kw)


def test_a_pass_is_the_rounds_stages_over_the_rounds_chunks(tmp_path):
    result = _pass(tmp_path / "s")
    store = Store(tmp_path / "s", create=False)
    parts = stages.chunks(result.blueprints, 5)
    assert len(parts) == 3
    for part in parts:  # the round's markers and chunk names, one per stage and chunk
        name = stages.chunk_name("chunk", part)
        assert store.is_complete("generate", RUN, 0, stages.chunk_name("gen", part))
        assert store.is_complete("rollout", RUN, 0, name) and store.is_complete("verify", RUN, 0, name)
    assert result.kept and all(k.verdict.passed and k.verdict.trajectory_id == k.trajectory.trajectory_id
                               for k in result.kept)
    assert {e.task_id for e in result.examples} == {k.task.task_id for k in result.kept}
    by_slice, _ = summary(result)
    assert sum(n for (_, what), n in by_slice.items() if what == "kept") == len(result.kept)


def test_same_inputs_same_rows_whatever_the_chunking_and_another_seed_differs(tmp_path):
    digest = lambda root: table_digests(Store(root, create=False), RUN)  # noqa: E731
    _pass(tmp_path / "a", chunk_size=5)
    _pass(tmp_path / "b", chunk_size=14)
    _pass(tmp_path / "c", seed=4)
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")


def test_a_pass_that_died_resumes_to_the_uninterrupted_rows(tmp_path, monkeypatch):
    _pass(tmp_path / "clean")
    real, seen = Store.write, []

    def die_on_second_rollout(self, records, chunk_id):
        if records and type(records[0]).table == "trajectories":
            seen.append(chunk_id)
            if len(seen) == 2:
                raise RuntimeError("killed in the second chunk's rollout")
        return real(self, records, chunk_id)

    monkeypatch.setattr(Store, "write", die_on_second_rollout)
    with pytest.raises(RuntimeError):
        _pass(tmp_path / "crashed")
    monkeypatch.setattr(Store, "write", real)
    monkeypatch.setattr(stages, "verify_with_repair", _counting(stages.verify_with_repair, calls := []))
    resumed = _pass(tmp_path / "crashed")
    assert table_digests(Store(tmp_path / "crashed", create=False), RUN) == \
        table_digests(Store(tmp_path / "clean", create=False), RUN)
    assert 0 < len(calls) < len(resumed.tasks)  # the first chunk was read back, not verified again


def _counting(fn, calls):
    def wrapped(*args):
        calls.append(1)
        return fn(*args)
    return wrapped


def test_a_partition_holding_another_pass_is_refused(tmp_path):
    _pass(tmp_path / "s", budget=14)
    _pass(tmp_path / "s", budget=14)  # the same pass again: a no-op resume
    with pytest.raises(PassConflict, match="budget 14"):
        _pass(tmp_path / "s", budget=20)
    # another seed or another chunking in the same partition would read back, or write beside, this pass's rows
    with pytest.raises(PassConflict, match="seed 3"):
        _pass(tmp_path / "s", budget=14, seed=4)
    with pytest.raises(PassConflict, match="chunk size 5"):
        _pass(tmp_path / "s", budget=14, chunk_size=7)
