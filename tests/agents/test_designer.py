import pytest

from evosyn.agents.designer import ColdStart, DesignError, EmbeddedDesigner, LearnerFeedback, NewFactor, apportion, \
    validate_direction
from evosyn.envs.packs import PlannerRules, get_pack
from evosyn.storage.records import Feedback, SliceStat
from tests.agents.conftest import with_factor


def design(space, steering, budget=120, rules=None):
    rules = rules if rules is not None else get_pack(space.domain).planner_rules
    return EmbeddedDesigner(rules).design(space, steering, budget, run_id="t", round=1, seed=0)


def test_apportion_sums_exactly():
    assert apportion([1, 1, 1], 10) == [4, 3, 3]
    assert sum(apportion([0.3, 2.0, 1.5, 0.0], 97)) == 97
    assert apportion([0, 0], 5) == [0, 0]


def test_cold_start_spreads_over_every_family_and_outcome(space):
    dirs = design(space, ColdStart())
    assert sum(d.n_blueprints for d in dirs) == 120
    pairs = {(d.allowed_values["task_family"][0], d.allowed_values["expected_outcome"][0]) for d in dirs}
    assert len(pairs) == 12 and {d.n_blueprints for d in dirs} == {10}
    assert all(d.steering == "cold_start" and d.objective_type == "exploration" for d in dirs)


def test_feedback_shifts_budget_to_weak_and_uncovered_slices(space):
    perf = [SliceStat(factor="task_family", value=v, count=40, successes=int(40 * s), success_rate=s)
            for v, s in [("flight_booking", 0.2), ("flight_change", 0.95), ("flight_cancellation", 0.6)]]
    fb = Feedback(run_id="t", round=1, feedback_id="f", model_version="m", overall_success=0.5, n_evaluated=120,
                  performance=perf)
    dirs = design(space, LearnerFeedback(feedback=fb), budget=300)
    by = {tuple(next(iter(d.allowed_values.items() or d.preferred_values.items()))[1]): d for d in dirs
          if "task_family" in (d.allowed_values or d.preferred_values)}
    weak, mastered = by[("flight_booking",)], by[("flight_change",)]
    assert weak.n_blueprints > by[("flight_cancellation",)].n_blueprints > mastered.n_blueprints > 0
    assert weak.objective_type == "failure_targeted" and mastered.objective_type == "over_mastered"
    assert sum(d.n_blueprints for d in dirs) == 300


def test_new_factor_favours_empty_values(space):
    sp = with_factor(space, "num_write")
    dirs = design(sp, NewFactor(factor="num_write", coverage={"0": 50, "1": 400, "2": 30}), budget=100)
    counts = {d.allowed_values["num_write"][0]: d.n_blueprints for d in dirs}
    assert counts["3-4"] == counts["5+"] > counts["2"] > counts["1"]
    assert sum(counts.values()) == 100


def test_directions_name_only_space_keys(space):
    d = design(space, ColdStart())[0]
    with pytest.raises(DesignError, match="not in space"):
        validate_direction(space, d.model_copy(update={"preferred_values": {"num_write": ["1"]}}))
    with pytest.raises(DesignError, match="values \\['teleport'\\]"):
        validate_direction(space, d.model_copy(update={"allowed_values": {"task_family": ["teleport"]}}))


def test_cold_start_plans_no_refusal_of_a_family_with_no_rule_to_break(space):
    one = PlannerRules(violable={"flight_cancellation": ["refund_eligibility"]})
    pairs = {(d.allowed_values["task_family"][0], d.allowed_values["expected_outcome"][0])
             for d in design(space, ColdStart(), rules=one)}
    assert {f for f, o in pairs if o == "refuse"} == {"flight_cancellation"} and len(pairs) == 7
    pairs = {(d.allowed_values["task_family"][0], d.allowed_values["expected_outcome"][0])
             for d in design(space, ColdStart(), rules=PlannerRules())}
    assert len(pairs) == 12  # a pack that names no rule: a refusal of every family (the planner checks none)
