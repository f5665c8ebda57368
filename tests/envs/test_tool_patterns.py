"""Observed tool_use_pattern and the fixed reference sets, on verified (gold-replayed) official airline tasks."""
from evosyn.envs.factors import observe
from evosyn.envs.gold import gold_messages
from evosyn.envs.reference import INTERACTION_TEMPLATES, reference_values
from evosyn.envs.replay import replay
from tests.envs.conftest import with_actions


def observed(domain, task_id):
    task = next(t for t in domain.tasks("base") if t.id == task_id)
    msgs = gold_messages(domain, task)
    return observe(domain.pack, replay(domain, task.initial_state, msgs), msgs), msgs, task


def test_task_7_read_modify_cancel(airline):
    # get_reservation_details x2 (XEHM4B, 59XX6W), update XEHM4B flights (paid), cancel XEHM4B, cancel 59XX6W
    obs, _, _ = observed(airline, "7")
    assert obs["tool_use_pattern"] == ["lookup_verify_then_modify", "multi_entity_retrieval",
                                       "partial_update_or_split_action", "policy_check_before_action",
                                       "price_or_fee_recalculation", "state_change_with_confirmation"]


def test_task_8_search_then_book(airline):
    # user, reservation, search_direct_flight, then book_reservation paid by certificate
    obs, _, _ = observed(airline, "8")
    assert obs["tool_use_pattern"] == ["multi_entity_retrieval", "price_or_fee_recalculation",
                                       "search_compare_then_book", "state_change_with_confirmation"]
    assert obs["state_change_type"] == ["create"] and obs["task_family"] == ["flight_booking"]


def test_task_20_split_payment_without_reads(airline):
    obs, _, _ = observed(airline, "20")  # book_reservation paid by a certificate and a credit card
    assert obs["tool_use_pattern"] == ["partial_update_or_split_action", "price_or_fee_recalculation",
                                       "state_change_with_confirmation"]


def test_write_without_confirmation_is_not_confirmed(airline):
    obs, msgs, task = observed(airline, "15")
    assert "state_change_with_confirmation" in obs["tool_use_pattern"]
    bare = [m for m in msgs if not (m.role == "user" and m.content and "go ahead" in m.content)]
    again = observe(airline.pack, replay(airline, task.initial_state, bare), bare)
    assert again["tool_use_pattern"] == ["price_or_fee_recalculation"]


def test_refusal_after_reading_is_a_policy_check(airline):
    from evosyn.storage.records import Message, ToolCall

    task = next(t for t in airline.tasks("base") if t.id == "0")
    msgs = [Message(role="user", content="I want to cancel reservation EHGLP3.", requestor="user"),
            Message(role="assistant", tool_calls=[ToolCall(id="a", name="get_reservation_details",
                                                           arguments={"reservation_id": "EHGLP3"})])]
    rep = replay(airline, task.initial_state, msgs)
    msgs.append(Message(role="tool", content=rep.steps[0].observed, tool_call_id="a"))
    msgs.append(Message(role="assistant", content="I'm sorry, this reservation is not eligible for cancellation."))
    obs = observe(airline.pack, replay(airline, task.initial_state, msgs), msgs)
    assert obs["expected_outcome"] == ["refuse"]
    assert obs["tool_use_pattern"] == ["policy_check_before_action"]


def test_every_observed_value_is_in_the_reference_sets(airline):
    ref = reference_values(airline.pack)
    assert sorted(ref) == sorted({"task_family", "tool_use_pattern", "expected_outcome", "state_change_type",
                                  "computation", "num_write", "num_read", "policy_or_constraint_focus"})
    assert all(a in ref and b in ref for a, b in INTERACTION_TEMPLATES)
    outside, seen = [], {k: set() for k in ref}
    for task in with_actions(airline):
        msgs = gold_messages(airline, task)
        obs = observe(airline.pack, replay(airline, task.initial_state, msgs), msgs)
        for k in ref:
            seen[k] |= set(obs[k])
            outside += [(task.id, k, v) for v in obs[k] if v not in ref[k]]
    assert not outside
    assert len(seen["tool_use_pattern"]) >= 6  # the rules fire on real tasks, not just one shape
