"""Per-round metrics read back from a small hand-built store (tasks/metrics.py)."""
import math

import pytest

from evosyn.envs.packs import get_pack
from evosyn.storage.store import Store
from evosyn.tasks import metrics as TM
from tests.storage.samples import samples

S = samples()


def rec(table, round, **fields):
    return S[table].model_copy(update={"round": round, **fields})


def obs(nw, fam="flight_change", pat="R-W"):
    return {"num_write": [nw], "task_family": [fam], "trajectory_pattern": [pat]}


@pytest.fixture()
def store(tmp_path):
    st = Store(tmp_path)
    st.write([rec("tasks", 1, task_id=t, requested={"num_write": [r]}) for t, r in
              (("a", "1"), ("b", "2"), ("c", "1"))] + [rec("tasks", 2, task_id="d", requested={})], "t")
    st.write([rec("verdicts", 1, verdict_id="va0", task_id="a", passed=False, attempt=0, observed=obs("2")),
              rec("verdicts", 1, verdict_id="va1", task_id="a", passed=True, attempt=1, observed=obs("1")),
              rec("verdicts", 1, verdict_id="vb", task_id="b", passed=False, observed=obs("1")),
              rec("verdicts", 1, verdict_id="vc", task_id="c", passed=True, observed=obs("1", pat="R")),
              rec("verdicts", 2, verdict_id="vd", task_id="d", passed=True, observed=obs("2", pat="W"))], "v")
    ev = lambda r, i, t, ok, nw, ts="diagnostic": rec(  # noqa: E731
        "evaluations", r, evaluation_id=i, task_id=t, task_set=ts, success=ok, observed=obs(nw))
    st.write([ev(1, "e1", "x", True, "1"), ev(1, "e2", "y", False, "2"), ev(1, "e3", "z", False, "2"),
              ev(1, "t1", "x", False, "1", "test"), ev(1, "t2", "y", True, "1", "test")], "e1")
    st.write([ev(2, "f1", "x", True, "1"), ev(2, "f2", "y", True, "2"), ev(2, "f3", "z", False, "2"),
              ev(2, "f4", "new", False, "2"),  # not evaluated in round 1: excluded from the gain
              ev(2, "u1", "x", True, "1", "test"), ev(2, "u2", "y", True, "1", "test")], "e2")
    st.write([rec("sft_examples", 2, example_id=f"x{i}", split="train") for i in range(250)]
             + [rec("sft_examples", 2, example_id="dg", split="diagnostic")], "s")
    return st


def test_verified_samples_one_per_task_from_its_passing_verdict(store):
    got = TM.verified_samples(store, "run-a")
    assert [(s["task_id"], s["observed"]["num_write"]) for s in got] == [("a", ["1"]), ("c", ["1"]), ("d", ["2"])]
    assert [s["task_id"] for s in TM.verified_samples(store, "run-a", upto=1)] == ["a", "c"]
    assert TM.pattern_union(store, ["run-a"]) == {"R-W", "R", "W"}


def test_controllability_counts_rejected_candidates(store):
    # before the gate, on each blueprint's first rollout: a requested 1, first rollout 2 (its repair, 1, does
    # not count); b 2 -> 1 (rejected); c 1 -> 1
    st = store
    bp = lambda b, want: rec("blueprints", 3, blueprint_id=b, selected_dimensions={"num_write": [want]})  # noqa: E731
    st.write([bp("a", "1"), bp("b", "2"), bp("c", "1")], "b3")
    st.write([rec("verdicts", 3, verdict_id="wa0", blueprint_id="a", task_id="a", attempt=0, observed=obs("2")),
              rec("verdicts", 3, verdict_id="wa1", blueprint_id="a", task_id="a", attempt=1, observed=obs("1")),
              rec("verdicts", 3, verdict_id="wb", blueprint_id="b", task_id="b", observed=obs("1")),
              rec("verdicts", 3, verdict_id="wc", blueprint_id="c", task_id="c", observed=obs("1"))], "v3")
    c = TM.controllability(st, "run-a", 3, "num_write")
    assert (c["n_requested"], c["n_realized"]) == (3, 3) and c["exact"] == pytest.approx(1 / 3)


def test_controllability_counts_an_infeasible_blueprint_as_a_miss(store):
    from evosyn.agents.synthesis import rejection_verdict, unplanned

    st = store
    bp = lambda b, want: rec("blueprints", 3, blueprint_id=b, selected_dimensions={"num_write": [want]})  # noqa: E731
    ok = [rec("verdicts", 3, verdict_id=f"w{i}", blueprint_id=b, task_id=b, observed=obs(v))
          for i, (b, v) in enumerate((("p", "0"), ("q", "1"), ("r", "2")))]
    st.write([bp("p", "0"), bp("q", "1"), bp("r", "2"), bp("s", "5+")], "b3")
    # s: the generator could not build it (a generate rejection: no task); a plan refused for a direction that
    # allowed num_write 3-4 only: no blueprint at all
    d = rec("directions", 3, direction_id="d-hi", allowed_values={"num_write": ["3-4"]})
    st.write([d], "d3")
    refused = rejection_verdict(unplanned(d, 0), "plan", "infeasible: 3-4 writes")
    st.write(ok + [rejection_verdict(rec("blueprints", 3, blueprint_id="s"), "generate", "infeasible"), refused], "v3")
    c = TM.controllability(st, "run-a", 3, "num_write")
    assert (c["n_requested"], c["n_realized"]) == (5, 3)
    assert c["exact"] == pytest.approx(3 / 5)  # every realized request matched; the two never realized did not
    assert c["spearman"] == pytest.approx(1.0)
    per_round = TM.round_controllability(st, "run-a", get_pack("airline"), 3)
    assert per_round["num_write"]["n_requested"] == 5 and "num_read" not in per_round
    m = TM.round_metrics(st, "run-a", get_pack("airline"), 3)
    assert m["controllability.num_write.exact"] == pytest.approx(0.6)
    assert m["controllability.num_write.n_realized"] == 3.0


def test_transition_on_matched_diagnostic_tasks(store):
    t = TM.transition(store, "run-a", get_pack("airline"), 2, min_n=1)
    # num_write=2: SR 0/2 -> 1/2 on tasks y, z; its verified share 0 (round 1) -> 1 (round 2): targeted, improved
    # num_write=1: SR 1 -> 1, share 1 -> 0
    assert t["targeted_slices"] == 1 and t["targeted_improvement_rate"] == 1.0
    assert t["slices"] == 3  # num_write 1, 2 and task_family flight_change
    # gaps 0, 1, 2/3 (num_write 1, num_write 2, flight_change) vs shifts -1, +1, 0: same order
    assert t["gap_allocation_spearman"] == pytest.approx(1.0)
    # gains 0, +.5, +1/3 vs shifts -1, +1, 0: same order
    assert t["allocation_gain_spearman"] == pytest.approx(1.0)


def test_gain_per_1k_uses_train_examples_added(store):
    assert TM.added_examples(store, "run-a", 2) == 250
    assert TM.gain_per_1k(store, "run-a", 2) == pytest.approx((1.0 - 0.5) / 0.25)
    assert math.isnan(TM.gain_per_1k(store, "run-a", 1))  # no round-0 (base) evaluation stored
