"""Training over the store: an unreadable model is retrained (with a warning), never a crashed resume."""
from __future__ import annotations

import logging

import pytest

import evosyn.tasks.loop as loop
import evosyn.tasks.stages as stages
from evosyn.agents.designer import ColdStart
from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.envs.ontology import load_initial_space
from evosyn.storage.store import Store
from evosyn.tasks.learn import load_round, model_path
from evosyn.envs.packs import get_domain, get_pack


@pytest.fixture
def ctx(tmp_path):
    ctx = stages.Ctx(Store(tmp_path / "s"), "r1", 1, seed=0, env=get_domain("airline"))
    space = load_initial_space(get_pack("airline"), run_id="r1")
    blueprints = stages.plan(ctx, space, stages.design(ctx, space, ColdStart(), 8, "evosyn"))
    tasks_ = stages.generate(ctx, space, blueprints)
    stages.verify_chunk(ctx, tasks_, stages.rollout(ctx, tasks_, "chunk-0"), "chunk-0")
    return ctx


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_a_damaged_model_is_retrained_with_one_warning(ctx, caplog, damage):
    first = loop.train(ctx)
    path = model_path(ctx.store, ctx.run_id, ctx.round)
    blob = path.read_bytes()
    path.write_bytes({"truncated": blob[: len(blob) // 2], "empty": b"", "garbage": b"not a joblib file"}[damage])
    with caplog.at_level(logging.WARNING, logger="evosyn"):
        again = loop.train(ctx)  # the resume: was `ValueError: EOF: reading array data`
    assert again.fingerprint == first.fingerprint
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()
    assert EmbeddedLearner.load(path).fingerprint == first.fingerprint  # rewritten whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["embedded.joblib", "embedded.json"]


def test_a_save_that_dies_leaves_the_previous_model(ctx, monkeypatch):
    learner = loop.train(ctx)
    path = model_path(ctx.store, ctx.run_id, ctx.round)
    before = path.read_bytes()
    import joblib

    def dies(obj, where, *a, **k):
        with open(where, "wb") as fh:
            fh.write(b"\x80partial")
        raise KeyboardInterrupt  # what a signal does mid-dump

    monkeypatch.setattr(joblib, "dump", dies)
    with pytest.raises(KeyboardInterrupt):
        learner.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["embedded.joblib", "embedded.json"]


def test_loading_a_damaged_model_names_it_and_the_fix(ctx):
    loop.train(ctx)
    path = model_path(ctx.store, ctx.run_id, ctx.round)
    path.write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="evosyn train"):
        load_round(ctx.store, ctx.run_id, ctx.round)


def test_a_probe_set_feeds_the_probes_only_and_only_with_learner_evidence(tmp_path):
    """``probe_size``: the Reflector's probes also read a balanced probe set (its own run id, seeded by the run's
    seed and round, task set ``probe``); feedback's performance and coverage stay the run's own; no_feedback,
    which sees no learner evidence, builds none; a rerun of the reflect reuses the stored evaluations."""
    from dataclasses import replace

    from evosyn.tasks.testset import test_set_run_id

    store = Store(tmp_path / "s")
    space = load_initial_space(get_pack("airline"), run_id="r1")
    base = stages.Ctx(store, "r1", 1, seed=0, env=get_domain("airline"))
    blueprints = stages.plan(base, space, stages.design(base, space, ColdStart(), 30, "evosyn"))
    tasks_ = stages.generate(base, space, blueprints)
    stages.verify_chunk(base, tasks_, stages.rollout(base, tasks_, "chunk-0"), "chunk-0")
    learner = loop.train(base)
    diagnostic = loop.evaluate(base, learner, "diagnostic")
    ctx = replace(base, probe_size=12)
    fb, probes, _, _ = loop.reflect(ctx, space, "evosyn", diagnostic, learner, None)
    probe_run = test_set_run_id(get_domain("airline"), loop.probe_seed(0, 1), 12, "uniform", "probeset")
    assert probe_run.startswith("probeset-uniform-airline-") and probe_run != test_set_run_id(get_domain("airline"), kind="uniform")
    probe_evals = [e for e in store.read_records("evaluations", run_id="r1") if e.task_set == "probe"]
    assert len(probe_evals) == 12
    assert {e.task_id for e in probe_evals} <= {v.task_id for v in store.read_records("verdicts", run_id=probe_run)
                                                if v.passed}  # verified members of the probe set
    again, run_again = loop.probe_evaluations(ctx, learner, 12)  # a resumed round: the stored rows, no new ones
    assert run_again == probe_run and sorted(e.evaluation_id for e in again) == sorted(
        e.evaluation_id for e in probe_evals)
    assert len([e for e in store.read_records("evaluations", run_id="r1") if e.task_set == "probe"]) == 12
    assert fb.n_evaluated == len(diagnostic)  # performance: the diagnostic set alone
    by_name = {p.probe: p for p in probes}
    assert by_name["num_write"].support == len(diagnostic) + 12  # the probes: diagnostic and probe set
    train_ids = {t.task_id for t in store.read_records("tasks", run_id="r1")}
    assert not train_ids & {e.task_id for e in probe_evals}  # never the run's own (training) tasks

    nf = replace(ctx, store=Store(tmp_path / "o"), run_id="r2")  # the control: no probe set, no probe evaluations
    nb = stages.plan(nf, space, stages.design(nf, space, ColdStart(), 30, "no_feedback"))
    nt = stages.generate(nf, space, nb)
    stages.verify_chunk(nf, nt, stages.rollout(nf, nt, "chunk-0"), "chunk-0")
    nf_learner = loop.train(nf)
    loop.reflect(nf, space, "no_feedback", loop.evaluate(nf, nf_learner, "diagnostic"), nf_learner, None)
    assert not [e for e in nf.store.read_records("evaluations", run_id="r2") if e.task_set == "probe"]
    assert not [t for t in nf.store.read_records("tasks") if t.run_id.startswith("probeset-")]
