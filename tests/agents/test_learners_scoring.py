"""The embedded learner scores with scikit-learn's own hashers and models, and decides as they do."""
import tracemalloc

import numpy as np
import pytest

from evosyn.agents.learners.embedded import MODELS, EmbeddedLearner
from evosyn.agents.learners.features import Scene
from evosyn.agents.learners.harness import TaskCase, evaluate
from evosyn.agents.learners.profiles import profile_features
from evosyn.agents.learners.replies import labels_of
from evosyn.agents.learners.state import state_tokens
from evosyn.envs.packs import get_domain
from evosyn.tasks.learn import fit_embedded


class Reference(EmbeddedLearner):
    """The learner deciding the plain way: every decision hashes its features afresh with scikit-learn's hashers
    (every feature of every candidate) and asks the scikit-learn model (``predict``, ``predict_proba``). It also
    asks the learner's own path on each decision and counts where the two differ."""

    def __init__(self, fitted: EmbeddedLearner):
        super().__init__(fitted.seed)
        self.__dict__.update(fitted.__dict__)
        self.fitted = fitted
        self.decisions = {"state": 0, "candidates": 0}
        self.mismatches: list[str] = []

    def _predict(self, model, constant, state):
        clf = getattr(self, model)
        if clf is None:
            return constant
        want = str(clf.predict(self.state_vec.transform([state]))[0])
        if (got := EmbeddedLearner._predict(self.fitted, model, constant, state)) != want:
            self.mismatches.append(f"{model}: {got} != {want}")
        self.decisions["state"] += 1
        return want

    def _positive(self, model, rows):
        X = self.arg_vec.transform([list(profile_features(tool, arg, p)) + list(extra) for tool, arg, p, extra in rows])
        want = getattr(self, model).predict_proba(X)[:, 1]
        if not np.array_equal(EmbeddedLearner._positive(self.fitted, model, rows), want):
            self.mismatches.append(f"{model}: scores differ among {len(rows)} candidates")
        self.decisions["candidates"] += len(rows)
        return want


@pytest.fixture(scope="module")
def trained(space, synth_pass):
    kept = synth_pass(space, 120, seed=5).kept
    cases = [TaskCase(c.task, c.verdict.observed) for c in kept[:30]]
    trajectories = [c.trajectory for c in kept[30:]]
    return fit_embedded(trajectories, get_domain("airline")), cases, trajectories


def decisions(learner: EmbeddedLearner, trajectories):
    """(history, scene) of every assistant move of the trajectories."""
    for traj in trajectories:
        for i, m in enumerate(traj.messages):
            if m.role == "assistant":
                yield traj.messages[:i], Scene.of(traj.messages[:i], learner.writes)


def arg_rows(learner: EmbeddedLearner, trajectories) -> list[tuple]:
    """The argument model's training rows ``(tool, arg, profile, extra)`` of the trajectories' calls."""
    rows, labels = [], []
    for traj in trajectories:
        for i, m in enumerate(traj.messages):
            if m.role == "assistant" and m.tool_calls:
                history = traj.messages[:i]
                learner._arg_samples(m.tool_calls[0], history, Scene.of(history, learner.writes), rows, labels)
    return rows


def test_multiclass_weights_are_laid_out_so_one_decision_copies_none(trained):
    """``coef_`` column-major: scikit-learn's ``decision_function`` gives the same numbers as with the usual
    layout, and scoring one state allocates kilobytes, not a copy of the weights (``n_classes * 2**18``)."""
    learner, _, trajectories = trained
    states = [state_tokens(h, s, labels_of(h)) for h, s in decisions(learner, trajectories)]
    X = learner.state_vec.transform(states)
    assert X.shape[0] > 500
    for clf in (learner.action, learner.write):
        assert clf is not None and len(clf.classes_) > 2  # multiclass: one weight column per class
        assert clf.coef_.T.flags.c_contiguous
        usual = np.ascontiguousarray(clf.coef_)
        assert np.array_equal(clf.decision_function(X), X @ usual.T + clf.intercept_)
        one = learner.state_vec.transform(states[:1])
        clf.decision_function(one)  # warm
        tracemalloc.start()
        clf.predict(one)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < usual.nbytes / 10, (peak, usual.nbytes)


def test_same_decisions_as_scikit_learn_over_many_decisions(trained):
    """A real trained model, 30 held-out episodes: every state prediction and every candidate score of the
    learner equals scikit-learn's on freshly hashed features, bit for bit, and the episodes and their evaluations
    are identical row for row."""
    learner, cases, _ = trained
    dom = get_domain("airline")
    ref = Reference(learner)
    want_evals, want_trajs = evaluate(ref, cases, dom, run_id="t", round=1, task_set="test", model_version="v")
    got_evals, got_trajs = evaluate(learner, cases, dom, run_id="t", round=1, task_set="test", model_version="v")
    assert not ref.mismatches, ref.mismatches[:5]
    assert ref.decisions["state"] >= 200 and ref.decisions["candidates"] >= 10_000, ref.decisions
    assert [e.model_dump() for e in got_evals] == [e.model_dump() for e in want_evals]
    assert [t.model_dump() for t in got_trajs] == [t.model_dump() for t in want_trajs]
    assert 0 < sum(e.success for e in got_evals) < len(cases)  # decisions that matter: some pass, some fail


def test_training_rows_hash_as_feature_hasher_does(trained):
    """Rows hashed once per distinct profile make the matrix ``FeatureHasher`` makes of every row's features."""
    learner, _, trajectories = trained
    rows = arg_rows(learner, trajectories[:40])
    assert len(rows) > 2000 and len(set(rows)) < len(rows)  # real rows, some repeated
    got = learner._hashed(rows)
    want = learner.arg_vec.transform([list(profile_features(t, a, p)) + list(e) for t, a, p, e in rows])
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, part), getattr(want, part)), part


def test_a_saved_model_decides_the_same_and_a_loaded_one_is_laid_out_for_scoring(trained, tmp_path):
    learner, cases, _ = trained
    dom = get_domain("airline")
    path = learner.save(tmp_path / "m.joblib")
    loaded = EmbeddedLearner.load(path)
    assert all(getattr(loaded, m) is None or getattr(loaded, m).coef_.flags.f_contiguous for m in MODELS)
    a = evaluate(learner, cases[:6], dom, run_id="t", round=1, task_set="test", model_version="v")[1]
    b = evaluate(loaded, cases[:6], dom, run_id="t", round=1, task_set="test", model_version="v")[1]
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    # a model saved with the usual layout (before it was laid out for scoring) is laid out when loaded
    learner.action.coef_ = np.ascontiguousarray(learner.action.coef_)
    try:
        assert EmbeddedLearner.load(learner.save(tmp_path / "old.joblib")).action.coef_.T.flags.c_contiguous
    finally:
        learner.action.coef_ = np.asfortranarray(learner.action.coef_)


def test_full_memories_start_afresh_and_decide_the_same(trained, monkeypatch):
    """With room for a handful of rows and groups, the memories are cleared call after call: the decisions are
    still scikit-learn's."""
    from evosyn.agents.learners import hashing, scoring

    learner, cases, _ = trained
    monkeypatch.setattr(scoring, "MAX_REMEMBERED", 5)
    monkeypatch.setattr(hashing, "MAX_COLUMNS", 7)
    for memory in ("_scores", "_columns"):  # what earlier tests left: this one starts empty
        monkeypatch.delitem(learner.__dict__, memory, raising=False)
    ref = Reference(learner)
    evaluate(ref, cases[:8], get_domain("airline"), run_id="t", round=1, task_set="test", model_version="v")
    assert not ref.mismatches, ref.mismatches[:5]
    assert ref.decisions["candidates"] > 500
    assert len(learner._columns) < 2000  # cleared on the way: 7 or the features of one call
