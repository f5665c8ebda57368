"""The two-level bootstrap (seeds, then tasks) of `bench learning` on cases whose answer is known."""
from __future__ import annotations

import numpy as np
import pytest

from evosyn.benchmarks.bootstrap import paired, two_level


def binary(p_per_seed, n_tasks, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((len(p_per_seed), n_tasks)) < np.asarray(p_per_seed)[:, None]).astype(float)


def test_identical_arms_differ_by_zero():
    a = binary([0.4, 0.5, 0.3, 0.6, 0.45], 300)
    d = paired(a, a.copy())
    assert d["mean"] == 0.0 and d["lo"] <= 0.0 <= d["hi"]
    assert (d["n_seeds"], d["n_tasks"], d["resamples"]) == (5, 300, 2000)


def test_a_constant_shift_gives_an_interval_around_it():
    rng = np.random.default_rng(1)
    b = rng.random((5, 200)) * 0.5
    d = paired(b + 0.2, b)
    assert d["mean"] == pytest.approx(0.2) and d["lo"] == pytest.approx(0.2) and d["hi"] == pytest.approx(0.2)


def test_a_real_gap_on_binary_outcomes_excludes_zero_and_covers_the_gap():
    b = binary([0.4] * 5, 300, seed=2)
    a = b.copy()
    flip = np.random.default_rng(3).random(a.shape) < 0.2
    a[(a == 0) & flip] = 1.0  # a solves what b solves, plus about 20% of b's failures (+0.12)
    d = paired(a, b)
    assert 0.0 < d["lo"] < d["mean"] < d["hi"]
    assert d["lo"] < 0.12 < d["hi"]


def test_the_interval_covers_the_true_rate():
    y = binary([0.35] * 5, 400, seed=4)
    ci = two_level(y)
    assert ci["lo"] < 0.35 < ci["hi"]
    assert ci["mean"] == pytest.approx(y.mean())


def test_spread_between_seeds_widens_the_interval():
    """The seed level counts: seeds that disagree (0.2 vs 0.8) give a wider interval than seeds that agree
    around the same mean, with the same number of tasks."""
    agree = binary([0.5] * 6, 300, seed=5)
    disagree = binary([0.2, 0.8, 0.2, 0.8, 0.2, 0.8], 300, seed=5)
    w = lambda ci: ci["hi"] - ci["lo"]  # noqa: E731
    assert w(two_level(disagree)) > 3 * w(two_level(agree))


def test_seeded_and_reproducible():
    y = binary([0.3, 0.6], 50)
    assert two_level(y, seed=7) == two_level(y, seed=7)
    assert two_level(y, seed=7)["se"] != two_level(y, seed=8)["se"]  # other draws


def test_one_seed_resamples_tasks_only():
    y = binary([0.5], 400, seed=9)
    ci = two_level(y)
    se = np.sqrt(0.25 / 400)  # binomial standard error of the rate
    assert ci["se"] == pytest.approx(se, rel=0.15)
    assert ci["hi"] - ci["lo"] == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_bad_input():
    with pytest.raises(ValueError, match="same seeds x tasks"):
        paired(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="missing cells"):
        two_level(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="non-empty"):
        two_level(np.zeros((0, 3)))
