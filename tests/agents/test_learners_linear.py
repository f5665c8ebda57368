"""The embedded learner's fast decisions are scikit-learn's: same scores (candidate scores to rounding: they are
summed in another order), same predictions, same episodes."""
import numpy as np
import pytest

from agents.learners.embedded import EmbeddedLearner
from agents.learners.features import Scene, state_tokens
from agents.learners.harness import TaskCase, evaluate
from agents.learners.linear import Linear
from agents.learners.profiles import profile_features
from agents.learners.replies import labels_of
from envs.packs import get_domain
from tasks.learn import fit_embedded


class Reference(EmbeddedLearner):
    """The learner deciding as it did before ``Linear``, ``Hashing`` and the remembered weights: every decision
    hashes its features afresh with scikit-learn's hashers and asks the scikit-learn model (``predict``,
    ``predict_proba``). It also checks the fast path against itself on each decision and counts them: the
    state models' scores bit for bit, the candidate scores to rounding and the choices made from them exactly."""

    def __init__(self, fitted: EmbeddedLearner):
        super().__init__(fitted.seed)
        self.__dict__.update({k: v for k, v in fitted.__dict__.items() if k != "_fast"})
        self.decisions = {"state": 0, "candidates": 0}
        self.mismatches: list[str] = []

    def _predict(self, model, constant, state):
        clf = getattr(self, model)
        if clf is None:
            return constant
        X = self.state_vec.transform([state])
        want = str(clf.predict(X)[0])
        twin = fitted_twin(self)
        if (got := EmbeddedLearner._predict(twin, model, constant, state)) != want:
            self.mismatches.append(f"{model}: {got} != {want}")
        if not np.array_equal(twin._state_scores(model, state), clf.decision_function(X).reshape(-1)):
            self.mismatches.append(f"{model}: state scores differ")
        self.decisions["state"] += 1
        return want

    def _positive(self, model, rows):
        X = self.arg_vec.transform([list(profile_features(tool, arg, p)) + list(extra) for tool, arg, p, extra in rows])
        want = getattr(self, model).predict_proba(X)[:, 1]
        fast = EmbeddedLearner._positive(fitted_twin(self), model, rows)
        if not np.allclose(fast, want, rtol=1e-12, atol=1e-15):
            self.mismatches.append(f"{model}: scores differ on {int(np.sum(~np.isclose(fast, want)))} of {len(rows)}")
        if np.argmax(fast) != np.argmax(want) or not np.array_equal(fast > 0.5, want > 0.5):
            self.mismatches.append(f"{model}: a different choice among {len(rows)} candidates")
        self.decisions["candidates"] += len(rows)
        return want


def fitted_twin(ref: Reference) -> EmbeddedLearner:
    """A plain ``EmbeddedLearner`` sharing the reference's models, keeping its score memory across calls."""
    twin = ref.__dict__.get("_twin")
    if twin is None:
        twin = ref.__dict__["_twin"] = EmbeddedLearner(ref.seed)
        twin.__dict__.update({k: v for k, v in ref.__dict__.items() if k not in ("_fast", "_twin")})
    return twin


@pytest.fixture(scope="module")
def trained(space, synth_pass):
    kept = synth_pass(space, 120, seed=5).kept
    cases = [TaskCase(c.task, c.verdict.observed) for c in kept[:30]]
    trajectories = [c.trajectory for c in kept[30:]]
    return fit_embedded(trajectories), cases, trajectories


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


def test_contiguous_weights_give_scikit_learns_scores_bit_for_bit(trained):
    learner, _, trajectories = trained
    X = learner.state_vec.transform([state_tokens(h, s, labels_of(h)) for h, s in decisions(learner, trajectories)])
    assert X.shape[0] > 500
    for clf in (learner.action, learner.write):
        assert clf is not None and len(clf.classes_) > 2  # multiclass: the model whose weights were copied per call
        assert not clf.coef_.T.flags.c_contiguous
        fast = Linear(clf)
        assert fast.weights.flags.c_contiguous
        assert np.array_equal(fast.decision(X), clf.decision_function(X))
        assert list(fast.predict(X)) == list(clf.predict(X))
    rows = learner._hashed(arg_rows(learner, trajectories[:20]))
    fast = Linear(learner.argument)  # binary: one column
    assert np.array_equal(Linear.positive(fast.decision(rows)), learner.argument.predict_proba(rows)[:, 1])


def test_same_decisions_as_scikit_learn_over_many_decisions(trained):
    """A real trained model, 30 held-out episodes: every state prediction of the fast path equals scikit-learn's
    (its scores bit for bit), every candidate score to rounding and every choice among candidates exactly, and
    the episodes and their evaluations are identical row for row."""
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


def test_a_saved_model_keeps_no_derived_state_and_decides_the_same(trained, tmp_path):
    learner, cases, _ = trained
    dom = get_domain("airline")
    evaluate(learner, cases[:3], dom, run_id="t", round=1, task_set="test", model_version="v")
    assert learner.__dict__.get("_fast")  # contiguous weights and remembered scores, built while deciding
    loaded = EmbeddedLearner.load(learner.save(tmp_path / "m.joblib"))
    assert "_fast" not in loaded.__dict__
    a = evaluate(learner, cases[:6], dom, run_id="t", round=1, task_set="test", model_version="v")[1]
    b = evaluate(loaded, cases[:6], dom, run_id="t", round=1, task_set="test", model_version="v")[1]
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
