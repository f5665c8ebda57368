import pytest

from evosyn.envs.car_bench.perturb import KINDS, perturb, trajectories
from evosyn.envs.car_bench.reward import gold_trajectory, pass_at_k, pass_hat_k, reward
from evosyn.storage.records import Message, ToolCall


def test_every_fixture_task_replays_its_gold_actions_to_reward_1(car):
    for task in car.tasks():
        outcome = reward(car, task, gold_trajectory(task, car))
        assert outcome.reward == 1.0 and not outcome.failed, (task.id, outcome)
        skipped = task.is_hallucination
        assert (outcome.r_actions_final is None) == skipped and (outcome.r_policy is None) == skipped


def test_every_perturbation_fails_a_component(car):
    rows = trajectories(car)
    assert {kind for _, kind, _ in rows} == {"gold", "parallel", *KINDS}
    for task, kind, messages in rows:
        if kind not in ("gold", "parallel"):
            outcome = reward(car, task, messages)
            assert outcome.reward == 0.0 and outcome.failed, (task.id, kind)


@pytest.mark.parametrize(("task_id", "kind", "failed"), [
    ("base_f1", "argument_changed", ["state"]), ("base_f0", "read_dropped", ["tool_subset", "policy"]),
    ("base_f4", "reordered_reply", ["state"]), ("base_f2", "refused_call", ["tool_execution"]),
    ("hallucination_f0", "removed_part_used", ["user_end"]), ("disambiguation_f0", "failure_keyword", ["user_end"])])
def test_each_perturbation_fails_the_component_it_breaks(car, task_id, kind, failed):
    task = car.official_task(task_id)
    outcome = reward(car, task, perturb(car, task, gold_trajectory(task, car), kind))
    assert outcome.failed == failed


def test_the_replay_never_trusts_recorded_observations(car):
    task = car.official_task("base_f1")
    gold = gold_trajectory(task, car)
    lied = [m.model_copy(update={"content": '{"status": "SUCCESS"}'}) if m.role == "tool" else m for m in gold]
    claimed = [m for m in gold if m.role != "assistant" or not m.tool_calls]  # calls gone, answers kept
    assert reward(car, task, lied).reward == 1.0
    assert reward(car, task, claimed).failed == ["state", "tool_subset"]


def test_a_refused_planner_call_costs_no_reward(car):
    """CAR-bench counts no planner refusal as a tool execution error: a gold trajectory with one still earns 1."""
    task = car.official_task("base_f1")
    gold = gold_trajectory(task, car)
    plan = [Message(role="assistant", tool_calls=[ToolCall(id="p", name="planning_tool",
                                                           arguments={"command": "mark_steps"})]),
            Message(role="tool", content="", tool_call_id="p")]
    outcome = reward(car, task, [gold[0], *plan, *gold[1:]])
    assert outcome.reward == 1.0 and outcome.r_tool_execution and outcome.tool_execution_errors == []


def test_two_components_failing_floor_at_zero_and_one_keyword_counts_once(car):
    task = car.official_task("base_f1")
    out = reward(car, task, [Message(role="user", content="hi"), Message(role="assistant", content="no")],
                 end_keyword="OUT_OF_SCOPE")
    assert out.reward == 0.0 and out.failed == ["state", "tool_subset", "user_end"]
    assert reward(car, task, gold_trajectory(task, car), end_keyword="STOP").reward == 1.0  # STOP is no failure


def test_policy_violations_from_tools_and_from_the_trajectory(car):
    task = car.official_task("base_f0")
    gold = gold_trajectory(task, car)
    roof_first = [gold[0], Message(role="assistant", tool_calls=[ToolCall(id="r", name="open_close_sunroof",
                                                                          arguments={"percentage": 50})]),
                  Message(role="tool", content="", tool_call_id="r"), gold[-1]]
    out = reward(car, task, roof_first)
    assert [v[:11] for v in out.policy_errors] == ["AUT-POL:005", "AUT-POL:009"] and out.r_policy is False
    judged = reward(car, task, gold, judge=lambda t, m: ["LLM-POL:008: no confirmation asked"])
    assert judged.failed == ["policy"]


def test_pass_hat_k_and_pass_at_k():
    trials = {"a": [1.0, 1.0, 0.0, 1.0], "b": [0.0, 0.0, 0.0, 1.0], "c": [1.0] * 4}
    assert pass_hat_k(trials, 1) == pytest.approx((3 / 4 + 1 / 4 + 1) / 3)
    assert pass_hat_k(trials, 2) == pytest.approx((3 / 6 + 0 + 1) / 3)
    assert pass_at_k(trials, 2) == pytest.approx((1 + 3 / 6 + 1) / 3)
    assert pass_hat_k(trials, 4) == pytest.approx(1 / 3) and pass_at_k(trials, 4) == 1.0
    with pytest.raises(ValueError, match="fewer than k=5"):
        pass_hat_k(trials, 5)
