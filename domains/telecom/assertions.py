"""What a telecom task is scored on: tau2 env assertions of the planned final state, and the reward basis.

tau2's evaluator replays gold actions without syncing the phone with the
network (``make_tool_call`` skips ``sync_tools``), so a payment request, a
resumed line or a refuel reaches the phone in a live conversation but not in
tau2's gold state. A task whose gold needs those syncs cannot be scored on the
DB hash by tau2; like tau2's own telecom tasks it is scored on env assertions
of the final state (the phone's service, data, speed and MMS; each line's
status and refuelled data; paid bills), and our verifier still compares the
full agent and device state.
"""
from __future__ import annotations

from typing import Any

from evosyn.domains.telecom.device import speed_test


def _a(env: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {"env_type": env, "func_name": func, "arguments": arguments, "assert_value": True}


def final_state_assertions(episode: Any, customer_id: str) -> list[dict[str, Any]]:
    user = episode.env.user_tools
    device = user.device
    out = [_a("user", "assert_service_status", expected_status=device.network_connection_status.value),
           # each expected value read by the tau2 assertion that checks it (True iff the state holds)
           _a("user", "assert_mobile_data_status", expected_status=user.assert_mobile_data_status(True)),
           _a("user", "assert_can_send_mms", expected_status=user.assert_can_send_mms(True)),
           _a("user", "assert_airplane_mode_status", expected_status=device.airplane_mode),
           _a("user", "assert_mobile_roaming_status", expected_status=device.roaming_enabled),
           _a("user", "assert_mobile_data_saver_mode_status", expected_status=device.data_saver_mode)]
    speed, desc = speed_test(user)
    if speed is not None:
        out.append(_a("user", "assert_internet_speed", expected_speed=speed, expected_desc=desc))
    db = episode.env.tools.db
    customer = next(c for c in db.customers if c.customer_id == customer_id)
    for line in (x for x in db.lines if x.line_id in customer.line_ids):
        out.append(_a("assistant", "assert_line_status", customer_id=customer_id, line_id=line.line_id,
                      expected_status=line.status.value))
        out.append(_a("assistant", "assert_data_refueling_amount", customer_id=customer_id, line_id=line.line_id,
                      expected_amount=line.data_refueling_gb))
    for bill in (b for b in db.bills if b.bill_id in customer.bill_ids and b.status.value == "Paid"):
        out.append(_a("assistant", "assert_no_overdue_bill", overdue_bill_id=bill.bill_id))
    return out


def unsynced_gold_digest(domain: Any, initial_state: Any, actions: list[tuple]) -> str:
    """The final state as tau2's evaluator computes it from the gold actions (no phone-network sync)."""
    episode = domain.episode(initial_state)
    for action in actions:
        try:
            episode.env.make_tool_call(action[0], requestor=action[2] if len(action) > 2 else "assistant",
                                       **action[1])
        except Exception:  # noqa: BLE001, S110 (tau2 catches any failing gold action and goes on)
            pass
    return episode.state_digest()


def reward_basis(domain: Any, initial_state: Any, actions: list[tuple], episode: Any, info: list[str]) -> list[str]:
    basis = ["ENV_ASSERTION"]
    if unsynced_gold_digest(domain, initial_state, actions) == episode.state_digest():
        basis.insert(0, "DB")
    if info:
        basis.append("COMMUNICATE")
    return basis
