"""Two-level bootstrap confidence intervals of a success rate over seeds and test tasks (`bench learning`).

A run's test success is the mean over test tasks of 0/1 outcomes, and an arm's is the mean over seeds of its
runs' rates: both the seeds and the tasks are samples, so an interval of the arm's rate resamples both
(seeds with replacement, then tasks with replacement within each drawn seed). The paired difference of two
arms resamples their per-(seed, task) differences with the same draws, so the seed and the task pair the two.

Hand-written rather than ``scipy.stats.bootstrap``: that one resamples observations of one level, and a
nested (hierarchical) resample of a seeds x tasks matrix is not among its options.
"""
from __future__ import annotations

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
_BATCH = 250  # resamples drawn at once: bounds the (batch, seeds, tasks) index array


def two_level(y: np.ndarray, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> dict[str, float]:
    """Mean of ``y`` (seeds x tasks; every cell observed) and its percentile interval by the two-level bootstrap.

    Returns ``mean`` (over seeds of the per-seed mean over tasks), ``lo``, ``hi``, ``se`` (the standard
    deviation of the resampled means), ``n_seeds``, ``n_tasks`` and ``resamples``. Seeded: the same input
    and ``seed`` give the same interval.
    """
    y = np.asarray(y, dtype=float)
    if y.ndim != 2 or 0 in y.shape:
        raise ValueError(f"y must be a non-empty seeds x tasks matrix, got shape {y.shape}")
    if np.isnan(y).any():
        raise ValueError("y has missing cells: pass the tasks every seed evaluated")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    n_seeds, n_tasks = y.shape
    means = np.empty(resamples)
    for start in range(0, resamples, _BATCH):
        b = min(_BATCH, resamples - start)
        rows = rng.integers(0, n_seeds, size=(b, n_seeds))
        cols = rng.integers(0, n_tasks, size=(b, n_seeds, n_tasks))
        means[start:start + b] = y[rows[:, :, None], cols].mean(axis=(1, 2))
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return {"mean": float(y.mean(axis=1).mean()), "lo": float(lo), "hi": float(hi), "se": float(means.std(ddof=1))
            if resamples > 1 else 0.0, "n_seeds": n_seeds, "n_tasks": n_tasks, "resamples": resamples}


def paired(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES, seed: int = 0,
           level: float = LEVEL) -> dict[str, float]:
    """``a - b`` paired by seed (row) and task (column): its mean and two-level bootstrap interval."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired arms need the same seeds x tasks, got {a.shape} and {b.shape}")
    return two_level(a - b, resamples=resamples, seed=seed, level=level)
