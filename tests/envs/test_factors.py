"""Observed factors on official tasks, against counts derived independently from tau2 itself."""
import pytest

from evosyn.envs.factors import bucket, observe, pattern
from evosyn.envs.gold import gold_messages
from evosyn.envs.replay import replay
from tests.envs.conftest import with_actions


def tau2_counts(domain_name, task):
    """Reads and state-changing writes of the gold actions, using only tau2's own env, tags and hash."""
    import importlib

    mod = importlib.import_module(f"tau2.domains.{domain_name}.environment")
    env = mod.get_environment()
    reads = writes = 0
    for action in task.gold_actions:
        kind = env.tools.tool_type(action.name).value
        if kind == "read":
            reads += 1
        before = env.get_db_hash() if kind == "write" else None
        try:
            env.use_tool(action.name, **action.arguments)
        except Exception:
            continue
        if kind == "write" and env.get_db_hash() != before:
            writes += 1
    return reads, writes


def observed(domain, task):
    msgs = gold_messages(domain, task)
    return observe(domain.pack, replay(domain, task.initial_state, msgs), msgs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["airline", "retail"])
def test_num_write_and_num_read_match_tau2(name, request):
    domain = request.getfixturevalue(name)
    mismatches = []
    for task in with_actions(domain):
        reads, writes = tau2_counts(name, task)
        obs = observed(domain, task)
        if (obs["num_read"], obs["num_write"]) != ([bucket(reads)], [bucket(writes)]):
            mismatches.append((task.id, obs["num_read"], obs["num_write"], reads, writes))
    assert not mismatches


def test_buckets():
    assert [bucket(n) for n in range(7)] == \
        ["0", "1", "2", "3-4", "3-4", "5+", "5+"]


def test_hand_checked_airline_task_7(airline):
    # get_reservation_details x2, then upgrade XEHM4B to economy, cancel XEHM4B, cancel 59XX6W
    task = next(t for t in airline.tasks("base") if t.id == "7")
    obs = observed(airline, task)
    assert obs["num_read"] == ["2"] and obs["num_write"] == ["3-4"]
    assert obs["trajectory_pattern"] == ["R-W"]
    assert obs["state_change_type"] == ["mixed"]
    assert obs["task_family"] == ["flight_change"]
    assert obs["expected_outcome"] == ["fulfill"]
    assert obs["policy_or_constraint_focus"] == ["fare_rule_constraint", "refund_eligibility"]


def test_refusal_without_writes_is_refuse(airline):
    from evosyn.storage.records import Message

    task = next(t for t in airline.tasks("base") if t.id == "0")  # no gold actions: refuse to cancel
    msgs = [Message(role="user", content="I want to cancel reservation EHGLP3.", requestor="user"),
            Message(role="assistant", content="I'm sorry, this reservation is not eligible for cancellation.")]
    obs = observe(airline.pack, replay(airline, task.initial_state, msgs), msgs)
    assert obs["expected_outcome"] == ["refuse"] and obs["num_write"] == ["0"]
    assert obs["task_family"] == ["flight_cancellation"] and obs["trajectory_pattern"] == ["none"]


def test_failed_write_does_not_count(airline):
    from evosyn.storage.records import Message, ToolCall

    msgs = [Message(role="assistant", tool_calls=[ToolCall(id="a", name="cancel_reservation",
                                                           arguments={"reservation_id": "NOPE00"})]),
            Message(role="tool", content="", tool_call_id="a"),
            Message(role="assistant", tool_calls=[ToolCall(id="b", name="calculate",
                                                           arguments={"expression": "2 * 50"})]),
            Message(role="tool", content="", tool_call_id="b")]
    rep = replay(airline, None, msgs)
    obs = observe(airline.pack, rep, msgs)
    assert obs["num_write"] == ["0"] and obs["computation"] == ["required"]
    assert pattern(rep.steps) == "W-C"
