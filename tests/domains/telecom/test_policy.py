"""Telecom policy rules: each fires on the state that breaks it, and no official gold breaks any."""
from __future__ import annotations

import pytest

from evosyn.domains.telecom.policy import OFFICIAL_WAIVERS, check_write
from evosyn.envs.gold import AFFIRMATIVE, confirmation_request, gold_messages
from evosyn.envs.policies import rule_code
from evosyn.envs.replay import replay
from evosyn.storage.records import Message, ToolCall


def _confirmed(call: ToolCall) -> list[Message]:
    return [Message(role="assistant", content=confirmation_request(call.name, call.arguments)),
            Message(role="user", content=AFFIRMATIVE, requestor="user"), Message(role="assistant", tool_calls=[call])]


def _codes(episode, name, **arguments):
    call = ToolCall(id="c", name=name, arguments=arguments)
    return {rule_code(v) for v in check_write(episode, call, _confirmed(call))}


def test_payment_request_only_for_an_overdue_bill(telecom):
    ep = telecom.episode()
    assert _codes(ep, "send_payment_request", customer_id="C1002", bill_id="B1005") == set()  # overdue
    assert _codes(ep, "send_payment_request", customer_id="C1001", bill_id="B1002") == {"payment_not_overdue"}
    ep.step("send_payment_request", {"customer_id": "C1002", "bill_id": "B1005"})
    assert "one_awaiting_payment" in _codes(ep, "send_payment_request", customer_id="C1002", bill_id="B1004")


def test_resume_needs_paid_bills_and_a_running_contract(telecom):
    ep = telecom.episode()
    assert _codes(ep, "resume_line", customer_id="C1001", line_id="L1003") == set()
    ep.step("suspend_line", {"customer_id": "C1002", "line_id": "L1004", "reason": "x"})
    assert _codes(ep, "resume_line", customer_id="C1002", line_id="L1004") == {"resume_overdue"}
    ep.run_function(_env_call("suspend_line_for_overdue_bill", customer_id="C1001", line_id="L1001",
                              new_bill_id="B7777777", contract_ended=True))
    assert _codes(ep, "resume_line", customer_id="C1001", line_id="L1001") == {"resume_overdue",
                                                                              "resume_contract_ended"}


def test_suspension_only_for_an_overdue_bill_and_refuel_at_most_two_gb(telecom):
    ep = telecom.episode()
    assert _codes(ep, "suspend_line", customer_id="C1001", line_id="L1001", reason="travel") == {"suspend_reason"}
    assert _codes(ep, "suspend_line", customer_id="C1002", line_id="L1004", reason="overdue") == set()
    assert _codes(ep, "refuel_data", customer_id="C1001", line_id="L1001", gb_amount=2.0) == set()
    assert _codes(ep, "refuel_data", customer_id="C1001", line_id="L1001", gb_amount=3.0) == {"refuel_limit"}


def test_unconfirmed_agent_write_is_flagged_and_device_actions_are_not_checked(telecom):
    ep = telecom.episode()
    call = ToolCall(id="c", name="enable_roaming", arguments={"customer_id": "C1001", "line_id": "L1001"})
    assert [rule_code(v) for v in check_write(ep, call, [Message(role="assistant", tool_calls=[call])])] == [
        "confirmation"]
    device = ToolCall(id="d", name="toggle_airplane_mode", arguments={}, requestor="user")
    assert check_write(ep, device, []) == []


def _env_call(func, **arguments):
    from tau2.data_model.tasks import EnvFunctionCall

    return EnvFunctionCall(env_type="assistant", func_name=func, arguments=arguments)


@pytest.mark.parametrize("split", ["base"])
def test_no_official_gold_breaks_a_rule_so_no_waiver_is_needed(telecom, split):
    tasks = [t for t in telecom.tasks(split) if t.gold_actions]
    violations = []
    for task in tasks:
        def before(episode, call, history, task_id=task.id):
            if telecom.tool_kind(call.name, call.requestor) == "write":
                violations.extend((task_id, v) for v in check_write(episode, call, history))
        replay(telecom, task.initial_state, gold_messages(telecom, task), before_call=before)
    assert any(a.name == "resume_line" for t in tasks for a in t.gold_actions)
    assert violations == [] and OFFICIAL_WAIVERS == {}
