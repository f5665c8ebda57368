"""Machine-checkable rules of the tau2 telecom policy (main_policy.md), on the state before a write.

Covered, each violation starting with its code in brackets:
  [confirmation]          an agent write needs the user's explicit yes to a description of it (EvoSyn's
                          house rule for every domain; telecom's text asks to "confirm the price")
  [payment_not_overdue]   a payment request only for a bill whose status is Overdue
  [one_awaiting_payment]  at most one bill awaiting payment per customer
  [resume_overdue]        a suspension is lifted only after all overdue bills are paid
  [resume_contract_ended] never lift a suspension when the line's contract end date is in the past
  [suspend_reason]        a line is suspended only for an overdue bill or an ended contract
  [refuel_limit]          at most 2 GB of data refuelled, and a positive amount
Device actions (requestor "user") are the user's own and are not policy-checked. Rules that need
judgement (the user is travelling, the price was stated) are not machine-checkable and not checked.

``OFFICIAL_WAIVERS`` lists the official tau2 telecom tasks whose gold actions contradict these rules
(measured over every official task by tests/domains/telecom/test_policy.py).
"""
from __future__ import annotations

from datetime import date

from evosyn.envs.policies.common import confirmation_rule
from evosyn.storage.records import Message, ToolCall

TODAY = date(2025, 2, 25)  # tau2 telecom's fixed clock (telecom/utils.get_today)
MAX_REFUEL_GB = 2.0

OFFICIAL_WAIVERS: dict[str, dict[str, str]] = {}


def _customer(db, customer_id):
    return next((c for c in db.customers if c.customer_id == customer_id), None)


def _line(db, line_id):
    return next((x for x in db.lines if x.line_id == line_id), None)


def _bills(db, customer) -> list:
    ids = set(customer.bill_ids)
    return [b for b in db.bills if b.bill_id in ids]


def _status(bill) -> str:
    return bill.status.value if hasattr(bill.status, "value") else str(bill.status)


def _line_rules(db, call: ToolCall) -> list[str]:
    args = call.arguments
    customer = _customer(db, args.get("customer_id"))
    if customer is None:
        return []  # the tool itself reports an unknown customer
    bills = _bills(db, customer)
    out = []
    if call.name == "send_payment_request":
        bill = next((b for b in bills if b.bill_id == args.get("bill_id")), None)
        if bill is not None and _status(bill) != "Overdue":
            out.append(f"[payment_not_overdue] send_payment_request: bill {bill.bill_id} is {_status(bill)}, "
                       f"not overdue")
        if any(_status(b) == "Awaiting Payment" for b in bills):
            out.append("[one_awaiting_payment] send_payment_request: another bill is already awaiting payment")
        return out
    line = _line(db, args.get("line_id"))
    if line is None or line.line_id not in customer.line_ids:
        return []
    ended = line.contract_end_date is not None and line.contract_end_date < TODAY
    if call.name == "resume_line":
        if any(_status(b) in ("Overdue", "Awaiting Payment") for b in bills):
            out.append("[resume_overdue] resume_line: the customer still has an unpaid overdue bill")
        if ended:
            out.append(f"[resume_contract_ended] resume_line: the contract of {line.line_id} ended on "
                       f"{line.contract_end_date}")
    elif call.name == "suspend_line":
        if not ended and not any(_status(b) == "Overdue" for b in bills):
            out.append("[suspend_reason] suspend_line: no overdue bill and the contract has not ended")
    elif call.name == "refuel_data":
        amount = args.get("gb_amount")
        if not isinstance(amount, (int, float)) or amount <= 0 or amount > MAX_REFUEL_GB:
            out.append(f"[refuel_limit] refuel_data: {amount!r} GB is not between 0 and {MAX_REFUEL_GB:g} GB")
    return out


def state_rules(db, call: ToolCall) -> list[str]:
    """The rules on the DB state alone (everything but confirmation); the generator plans against them."""
    if call.name in ("send_payment_request", "resume_line", "suspend_line", "refuel_data"):
        return _line_rules(db, call)
    return []


def check_write(episode, call: ToolCall, history: list[Message]) -> list[str]:
    if call.requestor == "user":
        return []
    return confirmation_rule(episode, call, history) + state_rules(episode.env.tools.db, call)
