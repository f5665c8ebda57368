"""How the fitted embedded learner scores: scikit-learn's hashers and its models' own decisions.

``Scoring`` is the part of ``EmbeddedLearner`` that turns decision states and candidate rows into the fitted
models' numbers, with scikit-learn's public API only: ``HashingVectorizer.transform`` of decision states,
``FeatureHasher`` of candidate rows (in a fit each distinct group of features hashed once,
``hashing.hashed_rows``; while deciding each feature once, ``hashing.Columns``), and the models' ``predict`` and
``predict_proba``. While deciding it remembers each model's score of a candidate row and each feature's column
(never saved: ``EmbeddedLearner.__getstate__``).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from sklearn import config_context
from sklearn.linear_model import SGDClassifier

from evosyn.agents.learners.hashing import Columns, hashed_rows
from evosyn.agents.learners.profiles import profile_parts

MAX_REMEMBERED = 1 << 18  # remembered row scores per model (a row is a few hundred bytes); cleared when full
# A decision scores one state or a few candidates, so scikit-learn's checks of its inputs cost more than the
# arithmetic (about 0.2 ms a call against microseconds). The learner's inputs are hashed counts (finite by
# construction) and its own arguments, so while it decides it skips the finiteness and parameter checks
# (scikit-learn's documented configuration for this), one context per call.
DECIDING = {"assume_finite": True, "skip_parameter_validation": True}


def for_prediction(clf: SGDClassifier) -> SGDClassifier:
    """The fitted model with its weights laid out for scoring sparse rows: ``coef_`` column-major.

    ``decision_function`` computes ``X @ coef_.T``; scipy's sparse-times-dense product needs the dense side
    row-major and copies it when it is not. ``coef_`` is ``(n_classes, 2**18)``, so with the usual row-major
    ``coef_`` every decision of a multiclass model (the next move, say) would copy ``n_classes * 2**18``
    weights (tens of megabytes) to score one row. The same numbers column-major make ``coef_.T`` row-major:
    no copy, and the same product. (A binary model's single row is both layouts already.)
    """
    clf.coef_ = np.asfortranarray(clf.coef_)
    return clf


class Scoring:
    arg_vec: Any  # FeatureHasher of candidate rows
    state_vec: Any  # HashingVectorizer of decision states

    def _hashed(self, rows: list[tuple]):
        """``arg_vec.transform`` of the features of candidate rows ``(tool, arg, profile, extra)``, each distinct
        row built once (a row depends on its own features only) from its groups of features, each distinct group
        hashed once (``hashing.hashed_rows``)."""
        at: dict[tuple, int] = {}
        index = [at.setdefault(r, len(at)) for r in rows]
        parts = profile_parts.__wrapped__  # uncached: a fit's distinct rows would each miss the cache, and evict
        return hashed_rows(self.arg_vec, [parts(tool, arg, p) + (extra,) for tool, arg, p, extra in at],
                           None if len(at) == len(rows) else index)

    def _states(self, states: list[str]):
        """``state_vec.transform(states)``: the decision states' tokens hashed, each row L2-normalized."""
        return self.state_vec.transform(states)

    def _predict(self, model: str, constant, state: str) -> str | None:
        clf = getattr(self, model)
        if clf is None:
            return constant
        with config_context(**DECIDING):
            return str(clf.predict(self._states([state]))[0])

    def _positive(self, model: str, rows: list[tuple]) -> np.ndarray:
        """``predict_proba(...)[:, 1]`` of the binary model ``model`` for candidate rows ``(tool, arg, profile,
        extra)``. A row's score depends on the row alone, and the candidates of many decisions share their rows
        (a row is what the features read of a candidate, never its value), so each model's score of a row is
        remembered: only the rows not scored before are hashed and scored, in one ``predict_proba`` call."""
        clf = getattr(self, model)
        known = self._remembered(model, clf)
        new = [r for r in dict.fromkeys(rows) if r not in known]
        if new and len(known) + len(new) > MAX_REMEMBERED:  # full: start afresh with this call's rows
            known.clear()
            new = list(dict.fromkeys(rows))
        if new:
            columns = self.__dict__.get("_columns")  # the features' columns of earlier decisions; never saved
            if columns is None or columns.hasher is not self.arg_vec:
                columns = self.__dict__["_columns"] = Columns(self.arg_vec)
            with config_context(**DECIDING):
                X = columns.rows([profile_parts(tool, arg, p) + (extra,) for tool, arg, p, extra in new])
                known.update(zip(new, clf.predict_proba(X)[:, 1].tolist()))
        return np.array([known[r] for r in rows], dtype=np.float64)

    def _remembered(self, model: str, clf: SGDClassifier) -> dict[tuple, float]:
        """Row -> ``clf``'s score of it, for the model fitted now (a refit starts afresh); never saved."""
        memory = self.__dict__.setdefault("_scores", {})
        if model not in memory or memory[model][0] is not clf:
            memory[model] = (clf, {})
        return memory[model][1]
