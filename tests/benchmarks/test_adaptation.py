"""Within-space adaptation: gap-allocation Spearman and targeted improvement rate, on runs built by hand."""
import math

import pytest

from evosyn.benchmarks.adaptation import adaptation, run_adaptation

VALUES = ["0", "1", "2", "3-4"]


def _run(arm, seed, success, shares, rounds=2, per_value=10):
    """A run whose round-r learner solves ``success[r][v]`` of each ``num_write`` slice of the test set, and whose
    round-r verified data has ``shares[r][v]`` of each value."""
    tasks = {f"{v}-{i}": v for v in VALUES for i in range(per_value)}
    outcomes = {("test", r): {t: float(int(t.split("-")[-1]) < success[r][v] * per_value) for t, v in tasks.items()}
                for r in range(1, rounds + 1)}
    observed = {"test": {t: {"num_write": [v], "trajectory_pattern": [t]} for t, v in tasks.items()}}
    alloc = {r: {("num_write", v): s for v, s in shares[r].items()} for r in range(1, rounds + 1)}
    return {"arm": arm, "seed": seed, "_outcomes": outcomes, "_observed": observed, "_allocation": alloc}


SUCCESS_1 = {"0": 0.9, "1": 0.7, "2": 0.5, "3-4": 0.2}
EVEN = {v: 0.25 for v in VALUES}


def test_data_steered_to_the_weak_slices_that_then_improved_scores_high():
    steered = {"0": 0.1, "1": 0.2, "2": 0.3, "3-4": 0.4}  # more data where the learner was weaker
    improved = {"0": 0.9, "1": 0.7, "2": 0.8, "3-4": 0.6}  # the two targeted slices rose most
    rows = run_adaptation(_run("evosyn", 0, {1: SUCCESS_1, 2: improved}, {1: EVEN, 2: steered}))
    assert [(r["set"], r["round"], r["slices"], r["targeted"]) for r in rows] == [("test", 2, 4, 2)]
    assert rows[0]["spearman"] == pytest.approx(1.0)  # the trajectory_pattern slices (one task each) are left out
    assert rows[0]["targeted_improvement_rate"] == 1.0


def test_data_steered_away_from_the_weak_slices_scores_low():
    away = {"0": 0.4, "1": 0.3, "2": 0.2, "3-4": 0.1}
    flat = {"0": 0.9, "1": 0.9, "2": 0.5, "3-4": 0.2}  # of the targeted slices, only "1" rose
    rows = run_adaptation(_run("static", 0, {1: SUCCESS_1, 2: flat}, {1: EVEN, 2: away}))
    assert rows[0]["spearman"] == pytest.approx(-1.0)
    assert rows[0]["targeted_improvement_rate"] == 0.5  # "1" rose 0.2, above the untargeted mean of 0.0; "0" did not


def test_without_allocation_change_there_is_no_rate_and_arms_are_summarized_over_seeds():
    same = run_adaptation(_run("static", 0, {1: SUCCESS_1, 2: SUCCESS_1}, {1: EVEN, 2: EVEN}))
    assert math.isnan(same[0]["spearman"]) and same[0]["targeted_improvement_rate"] is None
    runs = [_run("evosyn", s, {1: SUCCESS_1, 2: SUCCESS_1}, {1: EVEN, 2: {"0": 0.1, "1": 0.2, "2": 0.3, "3-4": 0.4}})
            for s in (0, 1)] + [_run("static", 0, {1: SUCCESS_1, 2: SUCCESS_1}, {1: EVEN, 2: EVEN})]
    rows = {r["arm"]: r for r in adaptation(runs, ["evosyn", "static"])}
    assert rows["evosyn"]["seeds"] == 2 and rows["evosyn"]["spearman"] == pytest.approx(1.0)
    assert rows["evosyn"]["spearman_range"] == [pytest.approx(1.0)] * 2 and set(rows["evosyn"]["per_seed"]) == {"0", "1"}
    assert math.isnan(rows["static"]["spearman"]) and rows["static"]["targeted_improvement_rate"] is None
