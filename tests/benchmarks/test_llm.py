"""`evosyn bench llm`'s pieces: the Planner reply in both protocols, and the steady throughput."""
from evosyn.benchmarks.fake_llm_server import Request
from evosyn.benchmarks.llm import (
    PlannedBlueprint,
    ideal_completions,
    planner_messages,
    planner_reply,
    steady_rate,
)


def test_the_planner_reply_echoes_the_plan_in_both_protocols():
    openai = planner_reply(Request("/v1/chat/completions", {"messages": planner_messages(7)}, {}))
    assert PlannedBlueprint.model_validate_json(openai["choices"][0]["message"]["content"]).plan_id == "plan-7"
    blocks = [{"role": "user", "content": [{"type": "text", "text": planner_messages(7)[-1]["content"]}]}]
    anthropic = planner_reply(Request("/v1/messages", {"messages": blocks, "tool_choice": {"name": "Plan"}}, {}))
    assert anthropic["content"][0]["input"]["plan_id"] == "plan-7"


def test_the_steady_rate_leaves_out_fill_and_drain():
    done = [5.0] * 10 + [5.0 + i * 0.1 for i in range(80)] + [20.0] * 10  # a slow start and end, 10 a second
    assert abs(steady_rate(done) - 10.0) < 0.2
    assert steady_rate([1.0, 2.0]) == 1.0  # too few to leave anything out: calls over the wall time


def test_the_ideal_client_fills_its_slots_and_keeps_to_the_limit():
    # 4 slots, 1 s each, no limit: waves of 4 a second
    assert ideal_completions([1.0] * 8, 4, 0) == [1.0] * 4 + [2.0] * 4
    # 60 rpm (1 a second, a bucket of 1): one call a second whatever the slots
    assert ideal_completions([0.5] * 4, 4, 60) == [0.5, 1.5, 2.5, 3.5]
    # 600 rpm: the first 10 at once, then one every 0.1 s
    done = ideal_completions([1.0] * 30, 30, 600)
    assert done[:10] == [1.0] * 10 and abs(done[-1] - 3.0) < 1e-9
