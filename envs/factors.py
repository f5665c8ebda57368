"""Observed factors: what a realized trajectory actually did, re-derived from its replay.

Never taken from the plan. Rules (all deterministic, documented here):

- ``num_write``: state-changing calls (tau2 WRITE tools whose call changed the
  replayed state; a failed or no-op write does not count), bucketed 0/1/2/3-4/5+.
- ``num_read``: READ tool calls, same buckets.
- ``trajectory_pattern``: one symbol per call (R read, W write, C compute =
  ``calculate``, T transfer = ``transfer_to_human_agents``), runs collapsed: "R-W-R-W".
- ``state_change_type``: the kind of the state-changing writes (create / modify /
  cancel / return_exchange / compensate), "mixed" for several kinds, "none".
- ``computation``: "required" if ``calculate`` was called or a numeric argument of
  a write is not a number the user stated (the agent derived it from
  observations), else "none".
- ``expected_outcome``: "fulfill" if state changed; otherwise "refuse" if the
  assistant declined (refusal wording) and "fulfill" for pure information requests.
- ``tool_use_pattern``: the tool-use shapes of the realized calls (envs/tool_patterns.py).
- ``task_family`` and ``policy_or_constraint_focus``: per-domain maps from the
  state-changing tools (below); with no state change, keywords of the user's request.
"""
from __future__ import annotations

import re
from typing import Iterable

from envs.replay import ReplayResult, StepRecord
from envs.tool_patterns import tool_use_patterns
from storage.records import Message

BUCKETS = ["0", "1", "2", "3-4", "5+"]


def bucket(n: int) -> str:
    return "0" if n <= 0 else "1" if n == 1 else "2" if n == 2 else "3-4" if n <= 4 else "5+"


_CHANGE_KIND = [("book", "create"), ("cancel", "cancel"), ("send_certificate", "compensate"),
                ("return", "return_exchange"), ("exchange", "return_exchange")]

FAMILY_BY_TOOL = {
    "airline": {"book_reservation": "flight_booking", "update_reservation_flights": "flight_change",
                "cancel_reservation": "flight_cancellation", "send_certificate": "refund_or_compensation",
                "update_reservation_baggages": "seat_or_baggage_service",
                "update_reservation_passengers": "seat_or_baggage_service"},
    "retail": {"cancel_pending_order": "order_cancellation", "modify_pending_order_items": "order_item_modification",
               "modify_pending_order_address": "order_logistics_modification",
               "modify_pending_order_payment": "order_logistics_modification",
               "return_delivered_order_items": "return_delivered_order",
               "exchange_delivered_order_items": "exchange_delivered_order",
               "modify_user_address": "profile_or_inquiry"},
    "telecom": {"refuel_data": "plan_change", "send_payment_request": "billing_issue",
                "suspend_line": "line_management", "resume_line": "line_management",
                "enable_roaming": "service_troubleshooting", "disable_roaming": "service_troubleshooting"},
}
FAMILY_KEYWORDS = {
    "airline": [("cancel", "flight_cancellation"), ("compensat", "refund_or_compensation"),
                ("refund", "refund_or_compensation"), ("certificate", "refund_or_compensation"),
                ("bag", "seat_or_baggage_service"), ("passenger", "seat_or_baggage_service"),
                ("seat", "seat_or_baggage_service"), ("book", "flight_booking"),
                ("change", "flight_change"), ("modify", "flight_change"),
                ("member", "loyalty_or_membership_service"), ("status", "loyalty_or_membership_service")],
    "retail": [("cancel", "order_cancellation"), ("exchange", "exchange_delivered_order"),
               ("return", "return_delivered_order"), ("address", "order_logistics_modification"),
               ("payment", "order_logistics_modification"), ("modify", "order_item_modification")],
    "telecom": [("bill", "billing_issue"), ("pay", "billing_issue"), ("plan", "plan_change"),
                ("data", "plan_change"), ("suspend", "line_management"), ("line", "line_management"),
                ("device", "device_upgrade")],
}
DEFAULT_FAMILY = {"airline": "flight_change", "retail": "profile_or_inquiry", "telecom": "service_troubleshooting"}
FOCUS_BY_TOOL = {
    "airline": {"book_reservation": "payment_or_credit_constraint", "update_reservation_flights": "fare_rule_constraint",
                "cancel_reservation": "refund_eligibility", "send_certificate": "compensation_eligibility",
                "update_reservation_baggages": "payment_or_credit_constraint",
                "update_reservation_passengers": "passenger_or_identity_constraint"},
    "retail": {"cancel_pending_order": "order_status_precondition",
               "modify_pending_order_items": "product_variant_match",
               "modify_pending_order_address": "order_status_precondition",
               "modify_pending_order_payment": "payment_or_giftcard_balance",
               "return_delivered_order_items": "order_status_precondition",
               "exchange_delivered_order_items": "product_variant_match",
               "modify_user_address": "identity_authentication"},
}
_REFUSAL = re.compile(r"\b(cannot|can't|can not|unable to|not able to|not eligible|not allowed|"
                      r"not permitted|i'm sorry|unfortunately|against (our|the) policy)\b", re.I)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _symbol(step: StepRecord) -> str | None:
    if step.call.name == "transfer_to_human_agents":
        return "T"
    if step.call.name == "calculate":
        return "C"
    return {"read": "R", "write": "W"}.get(step.kind)


def pattern(steps: Iterable[StepRecord]) -> str:
    out: list[str] = []
    for step in steps:
        sym = _symbol(step)
        if sym and (not out or out[-1] != sym):
            out.append(sym)
    return "-".join(out) or "none"


def _numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def observe(domain: str, replay: ReplayResult, messages: list[Message]) -> dict[str, list[str]]:
    steps = replay.steps
    writes = [s for s in steps if s.kind == "write" and s.changed_state and not s.error]
    reads = [s for s in steps if s.kind == "read"]
    user_text = " ".join(m.content or "" for m in messages if m.role == "user")
    stated = {float(x) for x in _NUMBER.findall(user_text)}
    computed = any(s.call.name == "calculate" for s in steps) or any(
        n not in stated for s in writes for n in _numbers(s.call.arguments))
    kinds = set()
    for s in writes:
        kinds.add(next((k for prefix, k in _CHANGE_KIND if s.call.name.startswith(prefix)), "modify"))
    change = "none" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
    refused = any(m.role == "assistant" and m.content and _REFUSAL.search(m.content) for m in messages)
    outcome = "fulfill" if writes or not refused else "refuse"
    families = FAMILY_BY_TOOL.get(domain, {})
    family = next((families[s.call.name] for s in writes if s.call.name in families), None)
    if family is None:
        first_user = next((m.content or "" for m in messages if m.role == "user" and m.content), "").lower()
        family = next((f for kw, f in FAMILY_KEYWORDS.get(domain, []) if kw in first_user),
                      DEFAULT_FAMILY.get(domain, "unknown"))
    focus = sorted({FOCUS_BY_TOOL.get(domain, {}).get(s.call.name) for s in writes} - {None})
    return {
        "num_write": [bucket(len(writes))],
        "num_read": [bucket(len(reads))],
        "trajectory_pattern": [pattern(steps)],
        "tool_use_pattern": tool_use_patterns(domain, steps, messages, refused=outcome == "refuse"),
        "state_change_type": [change],
        "computation": ["required" if computed else "none"],
        "expected_outcome": [outcome],
        "task_family": [family],
        "policy_or_constraint_focus": focus,
    }

