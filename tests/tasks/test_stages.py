"""Stages over the store: complete only when marked, a partial stage is redone, a read-back equals the original."""
from __future__ import annotations

import json

import pytest

import evosyn.tasks.stages as stages
from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.storage.store import Store
from evosyn.envs.packs import get_domain


@pytest.fixture
def ctx(tmp_path):
    return stages.Ctx(Store(tmp_path / "s"), "r1", 1, seed=0, env=get_domain("airline"))


def _planned(ctx, budget=40):
    space = load_initial_space(get_pack("airline"), run_id=ctx.run_id)
    dirs = stages.design(ctx, space, ColdStart(), budget, "evosyn")
    return space, stages.plan(ctx, space, dirs)


def _unsorted_arguments(task) -> bool:
    actions = task.tau2_task["evaluation_criteria"]["actions"]
    return any(list(a["arguments"]) != sorted(a["arguments"]) for a in actions)


def test_rollout_of_read_back_tasks_equals_rollout_of_the_originals(ctx):
    """Finding 3: the tasks a resumed run reads back must roll out to the same dialogue, byte for byte."""
    space, blueprints = _planned(ctx)
    made = stages.generate(ctx, space, blueprints)
    back = stages.generate(ctx, space, blueprints)  # done: read back from the store
    assert [t.model_dump_json() for t in back] == [t.model_dump_json() for t in made]
    # the case that broke: argument dicts whose keys are not in sorted order
    assert any(_unsorted_arguments(t) for t in made)
    fresh = stages.Ctx(Store(ctx.store.root.parent / "other"), ctx.run_id, ctx.round, ctx.seed, get_domain("airline"))
    a = stages.rollout(fresh, made, "chunk-a")
    b = stages.rollout(ctx, back, "chunk-a")
    assert [t.model_dump_json() for t in a] == [t.model_dump_json() for t in b]


def test_a_stage_is_done_only_after_its_last_write(ctx, monkeypatch):
    """Finding 2: verify writes verdicts, then examples; dying in between must not count as done."""
    space, blueprints = _planned(ctx, budget=6)
    tasks_ = stages.generate(ctx, space, blueprints)
    trajs = stages.rollout(ctx, tasks_, "chunk-x")
    real = Store.write

    def die_on_examples(self, records, chunk_id):
        if records and type(records[0]).table == "sft_examples":
            raise RuntimeError("killed before the examples were written")
        return real(self, records, chunk_id)

    monkeypatch.setattr(Store, "write", die_on_examples)
    with pytest.raises(RuntimeError):
        stages.verify_chunk(ctx, tasks_, trajs, "chunk-x")
    monkeypatch.setattr(Store, "write", real)
    assert ctx.store.count("verdicts") > 0 and ctx.store.count("sft_examples") == 0
    assert not ctx.done("verify", "chunk-x")
    verdicts, examples = stages.verify_chunk(ctx, tasks_, trajs, "chunk-x")  # redone, not read back empty
    assert examples and ctx.store.count("sft_examples") == len(examples)
    assert ctx.store.count("verdicts") == len(verdicts)  # the same chunk file replaced: no duplicates
    assert ctx.done("verify", "chunk-x")


def test_a_stage_with_no_output_is_done_and_not_redone(ctx, monkeypatch):
    """A chunk where nothing was kept wrote no examples; it is still finished, and a rerun is a no-op."""
    space, blueprints = _planned(ctx, budget=4)
    tasks_ = stages.generate(ctx, space, blueprints)
    verdicts, examples = stages.verify_chunk(ctx, tasks_, [], "chunk-empty")  # no trajectories: nothing kept
    assert verdicts == [] and examples == []
    assert ctx.done("verify", "chunk-empty")
    monkeypatch.setattr(stages, "verify_with_repair", lambda *a: pytest.fail("a finished stage was recomputed"))
    monkeypatch.setattr(stages.Ctx, "roles", lambda *a, **k: pytest.fail("a finished stage built its roles"))
    assert stages.verify_chunk(ctx, tasks_, [], "chunk-empty") == ([], [])


def test_finished_stages_are_no_ops_on_rerun(ctx, monkeypatch):
    space, blueprints = _planned(ctx, budget=6)
    tasks_ = stages.generate(ctx, space, blueprints)
    trajs = stages.rollout(ctx, tasks_, "chunk-y")
    verdicts, examples = stages.verify_chunk(ctx, tasks_, trajs, "chunk-y")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in ctx.store.tables_dir.rglob("*.parquet"))
    monkeypatch.setattr(stages.Ctx, "roles", lambda *a, **k: pytest.fail("a finished stage was recomputed"))
    dirs = stages.design(ctx, space, ColdStart(), 6, "evosyn")
    assert stages.plan(ctx, space, dirs) == blueprints
    assert stages.generate(ctx, space, blueprints) == tasks_
    assert stages.rollout(ctx, tasks_, "chunk-y") == trajs
    assert stages.verify_chunk(ctx, tasks_, trajs, "chunk-y") == (verdicts, examples)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in ctx.store.tables_dir.rglob("*.parquet")) == before


def test_markers_live_outside_the_tables(ctx):
    _planned(ctx, budget=4)
    markers = list(ctx.store.root.rglob("*.done"))
    assert markers and all(ctx.store.tables_dir not in m.parents for m in markers)
    assert all(json.loads(m.read_text())["run_id"] == "r1" for m in markers)


def test_a_redone_stage_leaves_no_stale_chunk(ctx):
    """Rejections written before a crash, none on the rerun: the rerun's chunk is what it produced, nothing more."""
    space, blueprints = _planned(ctx, budget=4)
    from evosyn.agents.synthesis import rejection_verdict

    chunk = stages.chunk_name("gen", blueprints)
    ctx.store.write([rejection_verdict(blueprints[0], "generate", "transport error before the crash")], chunk)
    tasks_ = stages.generate(ctx, space, blueprints)  # not marked: redone, and every blueprint now generates
    assert len(tasks_) == len(blueprints)
    assert ctx.read("verdicts", chunk) == []
    assert ctx.store.count("verdicts") == 0


def test_steering_for_each_arm_differs_from_evosyn_only_as_loop_says():
    """no_feedback populates the factor its Reflector added as evosyn does, but without the coverage counts of
    the learner-facing feedback, and is otherwise never steered by learner feedback (tasks/loop.py)."""
    from evosyn.agents.designer import LearnerFeedback, NewFactor
    from evosyn.storage.records import SliceStat
    from tests.storage.samples import samples

    s = samples()
    fb = s["feedback"].model_copy(update={"coverage": [SliceStat(factor="num_write", value="1", count=4)]})
    added = s["reflections"].model_copy(update={"steering": "new_factor"})
    kept = s["reflections"].model_copy(update={"steering": "learner_feedback", "new_proposals": []})
    assert stages.steering_for("evosyn", added, fb) == NewFactor(factor="num_write", coverage={"1": 4})
    assert stages.steering_for("no_feedback", added, fb) == NewFactor(factor="num_write")
    assert isinstance(stages.steering_for("evosyn", kept, fb), LearnerFeedback)
    assert isinstance(stages.steering_for("no_reflector", None, fb), LearnerFeedback)
    for arm in ("no_feedback", "static", "no_designer", "single_agent"):
        assert stages.steering_for(arm, kept, fb) == ColdStart(), arm
    assert stages.steering_for("static", added, fb) == ColdStart()
