"""A fitted linear classifier's decisions, one hashed row at a time, without the per-call copy.

scikit-learn's ``SGDClassifier.decision_function`` computes ``X @ coef_.T + intercept_``. ``coef_`` is
``(n_classes, 2**18)`` row-major, so ``coef_.T`` is column-major, and scipy's sparse-times-dense
product ravels it into a row-major copy on every call: a 2**18 x n_classes copy (tens of megabytes)
for each decision the embedded learner makes. ``Linear`` keeps the transposed weights C-contiguous once,
so the same scipy routine (``csr_matvecs``) runs on the same numbers in the same sequence: the scores are
bit-for-bit scikit-learn's (tests/agents/test_learners_linear.py checks this on a trained model), and so
are the decisions made from them.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit


class Linear:
    def __init__(self, clf: Any):
        self.classes = clf.classes_
        self.weights = np.ascontiguousarray(clf.coef_.T)  # (n_features, n_classes or 1), row-major: no copy per call
        self.intercept = np.array(clf.intercept_)

    def decision(self, X) -> np.ndarray:
        """``decision_function``: (n,) for a binary model, (n, n_classes) otherwise."""
        scores = X @ self.weights + self.intercept
        return scores.reshape(-1) if scores.shape[1] == 1 else scores

    def predict(self, X) -> np.ndarray:
        scores = self.decision(X)
        indices = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes.take(indices, axis=0)

    @staticmethod
    def positive(decision: np.ndarray) -> np.ndarray:
        """``predict_proba(X)[:, 1]`` of a binary log-loss model, from its decision values."""
        return expit(decision)
