import pytest

from evosyn.agents.designer import ColdStart, EmbeddedDesigner
from evosyn.agents.planner import EmbeddedPlanner, PlanError
from evosyn.envs.ontology import check_selection
from evosyn.envs.packs import get_pack
from tests.agents.conftest import with_factor

AIRLINE = get_pack("airline").planner_rules  # the rules of the ``space`` fixture's pack


def direction(space, **fields):
    d = EmbeddedDesigner(AIRLINE).design(space, ColdStart(), 12, run_id="t", round=1, seed=0)[0]
    return d.model_copy(update={"allowed_values": {}, **fields})


def test_blueprints_obey_cardinality_and_hard_constraints(space):
    d = direction(space, allowed_values={"task_family": ["flight_change"]},
                  forbidden_values={"difficulty_profile": ["hard"]})
    for i in range(50):
        bp = EmbeddedPlanner(rules=AIRLINE).plan(d, space, None, index=i, seed=3)
        sel = bp.selected_dimensions
        assert check_selection(space, sel) == []
        assert sel["task_family"] == ["flight_change"] and sel["difficulty_profile"] != ["hard"]
        assert bp.expected_difficulty_controls.expected_tool_calls in ("2-3", "4-5")


def test_soft_preferences_are_strongly_preferred(space):
    def share(d) -> float:
        return sum("user_false_claim" in EmbeddedPlanner(rules=AIRLINE).plan(d, space, None, index=i, seed=0)
                   .selected_dimensions["interaction_challenge"] for i in range(400)) / 400

    # about 0.6 preferred against 0.16 without (1 value of 7, some plans take two): far apart at n=400
    assert share(direction(space, preferred_values={"interaction_challenge": ["user_false_claim"]})) > 0.45
    assert share(direction(space)) < 0.3


def test_refusals_change_no_state_and_name_a_violable_focus(space):
    sp = with_factor(space, "num_write")
    d = direction(sp, allowed_values={"expected_outcome": ["refuse"], "task_family": ["flight_cancellation"]})
    for i in range(30):
        sel = EmbeddedPlanner(rules=AIRLINE).plan(d, sp, None, index=i, seed=0).selected_dimensions
        assert sel["num_write"] == ["0"]
        assert set(sel["policy_or_constraint_focus"]) & {"refund_eligibility", "change_or_cancellation_fee",
                                                          "time_window_constraint"}


def test_infeasible_combination_is_a_plan_error(space):
    sp = with_factor(space, "num_write")
    d = direction(sp, allowed_values={"expected_outcome": ["refuse"], "num_write": ["3-4"]})
    with pytest.raises(PlanError, match="refusal changes no state"):
        EmbeddedPlanner(rules=AIRLINE).plan(d, sp, None, index=0, seed=0)


def test_avoid_patterns_are_avoided(space):
    d = direction(space, avoid_patterns=["expected_outcome=refuse"])
    planner = EmbeddedPlanner(rules=AIRLINE)
    assert all(planner.plan(d, space, None, index=i, seed=0).selected_dimensions["expected_outcome"] == ["fulfill"]
               for i in range(30))


def test_unknown_factor_in_a_direction(space):
    with pytest.raises(KeyError, match="not in space v1"):
        EmbeddedPlanner(rules=AIRLINE).plan(direction(space, allowed_values={"num_write": ["1"]}), space, None,
                                            index=0, seed=0)


def test_a_packs_implications_are_forced_by_the_embedded_planner_and_checked_on_an_llm_selection():
    from evosyn.agents.planner import compatibility_problems
    from evosyn.envs.ontology import load_initial_space
    from evosyn.storage.records import Direction

    car = get_pack("car_bench")
    rules, space = car.planner_rules, load_initial_space(car, run_id="t")
    d = Direction(run_id="t", round=1, direction_id="d", condition_id="c", objective_type="exploration",
                  objective="x", budget_level="explore", allowed_values={"task_nature": ["disambiguation_user"]})
    for n in range(5):
        sel = EmbeddedPlanner(rules=rules).plan(d, space, None, index=n, seed=0).selected_dimensions
        assert sel["expected_behavior"] == ["clarify_with_user"]
    wrong = {"task_family": ["navigation"], "task_nature": ["hallucination_missing_tool"],
             "expected_behavior": ["fulfill_reach_goal"]}
    assert compatibility_problems(wrong, rules) == [
        "task_nature=hallucination_missing_tool goes with expected_behavior in ['decline_infeasible'] "
        "(got ['fulfill_reach_goal'])"]
    assert compatibility_problems({**wrong, "expected_behavior": ["decline_infeasible"]}, rules) == []


def test_a_refusal_is_planned_only_for_a_family_with_a_rule_to_break(space):
    from evosyn.envs.packs import PlannerRules

    rules = PlannerRules(violable={"flight_cancellation": ["refund_eligibility"]})  # one refusable family
    d = direction(space, allowed_values={"expected_outcome": ["refuse"]})
    for i in range(30):
        sel = EmbeddedPlanner(rules=rules).plan(d, space, None, index=i, seed=0).selected_dimensions
        assert sel["task_family"] == ["flight_cancellation"]
        assert "refund_eligibility" in sel["policy_or_constraint_focus"]  # the rule it breaks, among its foci
    pinned = direction(space, allowed_values={"expected_outcome": ["refuse"], "task_family": ["flight_change"]})
    with pytest.raises(PlanError, match="task_family must be one of"):
        EmbeddedPlanner(rules=rules).plan(pinned, space, None, index=0, seed=0)
