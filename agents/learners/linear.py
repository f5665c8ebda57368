"""A fitted linear classifier's decisions, one hashed row at a time, without the per-call copy.

scikit-learn's ``SGDClassifier.decision_function`` computes ``X @ coef_.T + intercept_``. ``coef_`` is
``(n_classes, 2**18)`` row-major, so ``coef_.T`` is column-major, and scipy's sparse-times-dense
product ravels it into a row-major copy on every call: a 2**18 x n_classes copy (tens of megabytes)
for each decision the embedded learner makes. ``Linear`` keeps the transposed weights C-contiguous once,
so the same scipy routine (``csr_matvecs``) runs on the same numbers in the same sequence: the scores are
bit-for-bit scikit-learn's (tests/agents/test_learners_linear.py checks this on a trained model), and so
are the decisions made from them.

A binary model also scores rows given as groups of feature strings (``sums``): its weight of each feature,
read once and remembered, summed by group, each group's sum remembered. That is ``decision`` of the row's
hashed matrix up to rounding (the sparse product adds the same terms column by column), so its decisions are
the same ones wherever no two candidates' scores are within rounding of each other;
tests/agents/test_learners_linear.py checks them on every decision of many held-out episodes.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

from agents.learners.hashing import Hashing

MAX_FEATURES = 1 << 19  # remembered feature weights per model; cleared when full
MAX_GROUPS = 1 << 18  # remembered group scores per model (each keeps its group alive; ~40 MB); cleared when full


class Weights(dict):
    """Feature -> a binary model's weight of it (its column's), read when first asked for."""

    def __init__(self, column: np.ndarray, hashing: Hashing):
        super().__init__()
        self.column, self.hashing = column, hashing

    def __missing__(self, feature: str) -> float:
        if len(self) >= MAX_FEATURES:
            self.clear()
        w = self[feature] = float(self.column[self.hashing.known[feature]])
        return w


class Linear:
    def __init__(self, clf: Any):
        self.classes = clf.classes_
        self.weights = np.ascontiguousarray(clf.coef_.T)  # (n_features, n_classes or 1), row-major: no copy per call
        self.intercept = np.array(clf.intercept_)
        self.by_feature: Weights | None = None  # a binary model's weight of each feature seen so far
        self.by_group: dict[int, tuple[tuple[str, ...], float]] = {}  # id(group) -> (group, its score)

    def decision(self, X) -> np.ndarray:
        """``decision_function``: (n,) for a binary model, (n, n_classes) otherwise."""
        scores = X @ self.weights + self.intercept
        return scores.reshape(-1) if scores.shape[1] == 1 else scores

    def predict(self, X) -> np.ndarray:
        scores = self.decision(X)
        indices = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes.take(indices, axis=0)

    def sums(self, rows: Sequence[tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]], hashing: Hashing
             ) -> np.ndarray:
        """``decision`` of a binary model for rows given as (its groups of features, its extra features): a
        row's score is the sum of its groups' scores, each the sum of its features' weights (a feature twice
        counts twice). A feature's weight is read the first time it is seen (its column from ``hashing``); the
        score of a group, and of a row's groups together, is remembered by the identity of the tuple (the
        profile's groups are cached tuples: the same object each time they recur; each is kept with its
        score, so while it is remembered its id names no other object)."""
        known, weigh = self.by_group, self._weigh(hashing)
        if len(known) > MAX_GROUPS:
            known.clear()

        b, out = float(self.intercept[0]), []
        for groups, extra in rows:
            hit = known.get(id(groups))
            if hit is None or hit[0] is not groups:
                parts = []
                for g in groups:
                    part = known.get(id(g))
                    if part is None or part[0] is not g:
                        part = known[id(g)] = (g, sum(map(weigh, g)))
                    parts.append(part[1])
                hit = known[id(groups)] = (groups, sum(parts))
            rest = known.get(id(extra))
            if rest is None or rest[0] is not extra:
                rest = known[id(extra)] = (extra, sum(map(weigh, extra)))
            out.append(hit[1] + rest[1] + b)
        return np.array(out, dtype=np.float64)

    def state_decision(self, columns: np.ndarray) -> np.ndarray:
        """``decision`` (one row, 1-d) of the L2-normalized row of these token columns (a column twice counts
        twice), without building a sparse matrix for a model of several classes: the same terms added in the
        same sequence as the sparse product adds them (its columns sorted; numpy sums the rows of a 2-d array
        one after another), so the same numbers bit for bit (tests/agents/test_learners_linear.py)."""
        if self.weights.shape[1] == 1:
            X = sp.csr_matrix((np.ones(len(columns)), columns, [0, len(columns)]), shape=(1, len(self.weights)))
            X.sum_duplicates()
            inplace_csr_row_normalize_l2(X)
            return self.decision(X)
        cols, counts = np.unique(columns, return_counts=True)
        data = counts.astype(np.float64)
        if len(data):
            data /= np.sqrt(np.sum(data * data))  # integer counts: their squares add up exactly, whatever the sequence
        return (data[:, None] * self.weights[cols]).sum(axis=0) + self.intercept

    def _weigh(self, hashing: Hashing):
        """feature -> the binary model's weight of it, remembered."""
        if self.by_feature is None or self.by_feature.hashing is not hashing:
            self.by_feature = Weights(self.weights[:, 0], hashing)
        return self.by_feature.__getitem__

    @staticmethod
    def positive(decision: np.ndarray) -> np.ndarray:
        """``predict_proba(X)[:, 1]`` of a binary log-loss model, from its decision values."""
        return expit(decision)
