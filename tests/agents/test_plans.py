"""The shared pieces of the embedded generators (agents/plans.py)."""
from dataclasses import dataclass, field

import pytest

from evosyn.agents.plans import (
    DEFAULT_PRIOR,
    TOTAL_CALLS,
    Infeasible,
    fit_reads,
    linked,
    ops_in_order,
    sample_new,
    sample_up_to,
    seeded_rng,
    target_counts,
    targets,
    unique_actions,
)


def sel(outcome="fulfill", writes=None, reads=None, difficulty="medium"):
    out = {"task_family": ["f"], "expected_outcome": [outcome], "difficulty_profile": [difficulty]}
    if writes is not None:
        out["num_write"] = [writes]
    if reads is not None:
        out["num_read"] = [reads]
    return out


def test_targets_draw_in_the_documented_order():
    # seeded rng, then target_counts, then one read draw per try: the order every generator had inline
    t = targets(sel(writes="2"), "bp", 7, DEFAULT_PRIOR)
    rng = seeded_rng("bp", 7)
    writes, _ = target_counts(sel(writes="2"), rng, DEFAULT_PRIOR)
    assert (t.writes, t.reads, t.exact, t.family, t.outcome) == (writes, None, False, "f", "fulfill")
    for _ in range(5):
        assert t.reads_for_try() == max(0, rng.randint(*TOTAL_CALLS["medium"]) - writes)
    assert t.rng.random() == rng.random()


def test_exact_reads_draw_nothing_per_try():
    t = targets(sel(writes="1", reads="3-4"), "bp", 0, DEFAULT_PRIOR)
    state = t.rng.getstate()
    assert t.exact and t.reads_for_try() == t.reads and 3 <= t.reads <= 4
    assert t.rng.getstate() == state
    assert "with 1 writes and" in str(t.exhausted("user", 40)) and "no user in 40 tries" in str(t.exhausted("user", 40))


def test_a_refusal_that_writes_is_infeasible():
    with pytest.raises(Infeasible, match="a refusal cannot change state"):
        targets(sel(outcome="refuse", writes="1"), "bp", 0, DEFAULT_PRIOR)
    assert targets(sel(outcome="refuse"), "bp", 0, DEFAULT_PRIOR).writes == 0


def test_fit_reads():
    assert fit_reads(2, 3, exact=True) == 3
    assert fit_reads(4, 3, exact=True) is None
    assert fit_reads(4, 3, exact=False) == 4


def test_unique_and_sampled_actions():
    a, b, c = ("t", {"x": 1}), ("t", {"x": 2}), ("u", {"x": 1})
    assert unique_actions([a, b, a, c]) == [a, b, c]
    seen = {f"t:{sorted({'x': 1}.items())}"}
    assert unique_actions([a, b, c], seen) == [b, c]
    assert sample_new(seeded_rng("s", 0), [a, b, c, b], seen, 3) is None
    assert sorted(map(str, sample_new(seeded_rng("s", 0), [a, b, c, b], seen, 2))) == sorted(map(str, [b, c]))


@dataclass
class _Op:
    tool: str
    arguments: dict
    say: str
    reads: list = field(default_factory=list)


def test_ops_in_order_puts_each_lookup_once_before_its_op():
    r1, r2 = ("get_a", {"id": 1}), ("get_b", {"id": 2})
    ops = [_Op("w1", {"id": 1}, "do one", [r1]), _Op("w2", {"id": 2}, "do two", [r1, r2])]
    actions, intents = ops_in_order(ops)
    assert actions == [r1, ("w1", {"id": 1}), r2, ("w2", {"id": 2})]
    assert intents == [{"say": "do one", "tool": "w1", "arguments": {"id": 1}},
                       {"say": "do two", "tool": "w2", "arguments": {"id": 2}}]


def test_sample_up_to_and_linked():
    assert sorted(sample_up_to(seeded_rng("s", 1), [1, 2, 3], 5)) == [1, 2, 3]
    two = sample_up_to(seeded_rng("s", 1), [1, 2, 3], 2)
    assert len(set(two)) == 2 and two == seeded_rng("s", 1).sample([1, 2, 3], 2)
    assert linked({"a": 1, "b": None, "c": 3}, ["c", "x", "b", "a"]) == [("c", 3), ("a", 1)]
