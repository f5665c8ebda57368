"""The per-slice breakdown of `bench learning`'s last-round differences, on hand-made runs."""
from __future__ import annotations

import pytest

from evosyn.benchmarks.learning_slices import largest, slices


def run(arm, seed, solved, tasks=20):
    """Two rounds of one set; round 2 solves the tasks in ``solved``; tasks t0-t9 have num_write=1, t10-t19
    num_write=3-4, and every task has multi_item=no but t19 (yes)."""
    names = [f"t{i}" for i in range(tasks)]
    observed = {t: {"num_write": ["1" if i < 10 else "3-4"], "multi_item": ["yes" if i == 19 else "no"],
                    "trajectory_pattern": [t]} for i, t in enumerate(names)}
    return {"arm": arm, "seed": seed,
            "_outcomes": {("test", 1): {t: 0.0 for t in names}, ("test", 2): {t: float(t in solved) for t in names}},
            "_observed": {"test": observed}}


def test_slices_split_the_difference_and_find_what_no_arm_solves():
    low = {f"t{i}" for i in range(10)}  # both arms solve the num_write=1 tasks
    high = low | {f"t{i}" for i in range(10, 15)}  # evosyn also half of the 3-4 ones
    runs = [run("evosyn", s, high) for s in (0, 1)] + [run("static", s, low) for s in (0, 1)]
    out = slices(runs, ["evosyn", "static"], "evosyn", resamples=300)
    rows = {(r["factor"], r["value"]): r for r in out["rows"]}
    assert set(rows) == {("num_write", "1"), ("num_write", "3-4"), ("multi_item", "no"), ("multi_item", "yes")}
    hi = rows[("num_write", "3-4")]
    assert (hi["round"], hi["n_tasks"], hi["a"], hi["b"]) == (2, 10, "evosyn", "static")
    assert hi["success"] == {"evosyn": pytest.approx(0.5), "static": 0.0}
    assert hi["mean"] == pytest.approx(0.5) and hi["lo"] > 0 and hi["contribution"] == pytest.approx(0.25)
    assert rows[("num_write", "1")]["mean"] == 0.0
    # one factor's shares add up to the set's difference (5 of 20 tasks)
    assert sum(r["contribution"] for r in out["rows"] if r["factor"] == "multi_item") == pytest.approx(0.25)
    assert out["unsolved"] == [{"set": "test", "factor": "multi_item", "value": "yes", "n_tasks": 1, "share": 0.05}]
    top = largest(out["rows"], most=2)  # the two slices holding all of it (a tie: by factor name)
    assert [(r["factor"], r["value"]) for r in top] == [("multi_item", "no"), ("num_write", "3-4")]


def test_a_run_without_observed_factors_gives_no_slices():
    r = run("evosyn", 0, set())
    r.pop("_observed")
    assert slices([r], ["evosyn"], "evosyn", resamples=50) == {"rows": [], "unsolved": []}
