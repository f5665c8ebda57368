"""Metric functions against small hand-computed examples (App. B.1, B.5, B.7, B.8, B.9, B.12)."""
import math

import pytest

from evosyn.storage import metrics as M

REF = {"a": ["x", "y"], "b": ["p", "q", "r", "s"]}
SAMPLES = [{"a": ["x"], "b": ["p"]}, {"a": ["x"], "b": ["q"]}, {"a": ["x"], "b": ["p", "q"]},
           {"a": ["z"]}]  # "z" is outside V_a: it counts for nothing


def test_factor_coverage():
    # a: {x} of {x, y} = 1/2; b: {p, q} of 4 = 1/2
    assert M.factor_coverage(SAMPLES, REF) == pytest.approx(0.5)
    assert M.factor_coverage(SAMPLES + [{"a": ["y"], "b": ["r", "s"]}], REF) == pytest.approx(1.0)


def test_factor_balance():
    # a: only x -> H = 0; b: p 2, q 2 -> ln 2 / ln 4 = 0.5; mean 0.25
    assert M.factor_balance(SAMPLES, REF) == pytest.approx(0.25)
    even = [{"a": [a], "b": [b]} for a in REF["a"] for b in REF["b"]]
    assert M.factor_balance(even, REF) == pytest.approx(1.0)


def test_interaction_coverage():
    # (a, b): observed pairs (x, p), (x, q) of 2 x 4 cells
    assert M.interaction_coverage(SAMPLES, REF, [("a", "b")]) == pytest.approx(2 / 8)
    # (b, b): (p, p), (q, q), (p, q), (q, p) of 16; mean with 2/8
    assert M.interaction_coverage(SAMPLES, REF, [("a", "b"), ("b", "b")]) == pytest.approx((2 / 8 + 4 / 16) / 2)


def test_trajectory_diversity_uses_the_shared_union():
    pats = ["R-W", "R-W", "R"]
    h = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert M.trajectory_diversity(pats, {"R-W", "R"}) == pytest.approx(h / math.log(2))
    # a wider union of the compared runs lowers the same data's score
    assert M.trajectory_diversity(pats, {"R-W", "R", "R-W-R", "none"}) == pytest.approx(h / math.log(4))
    with pytest.raises(ValueError, match="shared union"):
        M.trajectory_diversity(pats, {"R"})


def test_distinct_and_size_matched_sequences():
    seqs = [("a",), ("a",), ("b",), ("c",)]
    assert M.distinct_sequences(seqs) == 3
    assert M.size_matched_distinct(seqs, 4) == 3.0
    assert M.size_matched_distinct(seqs, 1) == 1.0
    # 2 of 4 without replacement: 1 of 6 pairs is (a, a) -> E = (1 + 5 * 2) / 6
    assert M.size_matched_distinct(seqs, 2, draws=4000) == pytest.approx(11 / 6, abs=0.03)


def test_controllability_exact_and_rank():
    pairs = [("1", "1"), ("2", "2"), ("3-4", "5+"), ("0", "0")]
    c = M.controllability(pairs)
    assert c["n"] == 4 and c["exact"] == pytest.approx(0.75)
    assert c["spearman"] == pytest.approx(1.0)  # order kept although one value is off
    # requested 2, 1, 0 realized as 1, 2, 3-4: ranks fully reversed
    assert M.controllability([("2", "1"), ("1", "2"), ("0", "3-4")])["spearman"] == pytest.approx(-1.0)


def test_slice_shares_and_success():
    shares = M.slice_shares(SAMPLES, REF)
    assert shares[("a", "x")] == pytest.approx(0.75) and shares[("b", "p")] == pytest.approx(0.5)
    assert shares[("b", "s")] == 0.0
    results = [({"a": ["x"]}, True), ({"a": ["x"]}, False), ({"a": ["y"]}, True)]
    assert M.slice_success(results, REF) == {("a", "x"): 0.5, ("a", "y"): 1.0}
    assert M.slice_success(results, REF, min_n=2) == {("a", "x"): 0.5}


BEFORE = {"s1": 0.1, "s2": 0.4, "s3": 0.3, "s4": 0.2}
AFTER = {"s1": 0.4, "s2": 0.2, "s3": 0.3, "s4": 0.1}  # shift +.3, -.2, 0, -.1
SR0 = {"s1": 0.2, "s2": 0.9, "s3": 0.5, "s4": 0.7}  # gap .8, .1, .5, .3: same order as the shift


def test_capability_transition_hand_computed():
    sr1 = {"s1": 0.6, "s2": 0.8, "s3": 0.5, "s4": 0.7}  # gain +.4, -.1, 0, 0
    t = M.capability_transition(BEFORE, AFTER, SR0, sr1, overall_before=0.6)
    assert t["slices"] == 4
    assert t["gap_allocation_spearman"] == pytest.approx(1.0)
    # ranks shift [4,1,3,2] vs gain [4,1,2.5,2.5]: 4.5 / sqrt(5 * 4.5)
    assert t["allocation_gain_spearman"] == pytest.approx(4.5 / math.sqrt(22.5))
    # only s1 is upweighted and below the overall 0.6; it improved
    assert (t["targeted_slices"], t["targeted_improved"], t["targeted_improvement_rate"]) == (1, 1, 1.0)
    worse = M.capability_transition(BEFORE, AFTER, SR0, {**sr1, "s1": 0.1}, overall_before=0.6)
    assert worse["targeted_improvement_rate"] == 0.0
    # a reversed reallocation (static-like) correlates negatively with the gap
    rev = M.capability_transition(AFTER, BEFORE, SR0, sr1, overall_before=0.6)
    assert rev["gap_allocation_spearman"] == pytest.approx(-1.0) and math.isnan(rev["targeted_improvement_rate"])


def test_gain_per_1k():
    assert M.gain_per_1k(0.4, 0.5, 250) == pytest.approx(0.4)
    assert math.isnan(M.gain_per_1k(0.4, 0.5, 0))
