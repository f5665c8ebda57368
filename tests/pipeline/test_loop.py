"""Training over the store: an unreadable model is retrained (with a warning), never a crashed resume."""
from __future__ import annotations

import logging

import pytest

import pipeline.loop as loop
import pipeline.stages as stages
from agents.designer import ColdStart
from agents.learners.embedded import EmbeddedLearner
from envs.ontology import load_initial_space
from storage.store import Store
from pipeline.learn import load_round, model_path


@pytest.fixture
def ctx(tmp_path):
    ctx = stages.Ctx(Store(tmp_path / "s"), "r1", 1, seed=0)
    space = load_initial_space("airline", run_id="r1")
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
