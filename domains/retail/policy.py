"""Machine-checkable rules of the tau2 retail policy (policy.md), on the state before a write.

Covered, each violation starting with its rule code in brackets:

- ``[confirmation]``: explicit user confirmation of this action (the shared rule).
- ``[authentication]``: the user was authenticated (a successful ``find_user_id_by_email`` or
  ``find_user_id_by_name_zip``) before the write, and the write touches only that user's order
  or profile ("you can only help one user per conversation").
- ``[status_check]``: the order was looked up (``get_order_details``) before it is acted on
  ("you should check its status before taking the action").
- ``[order_status]``: cancel and item modification need status 'pending'; address and payment
  changes a pending order whose items were not modified ("the agent will not be able to modify
  or cancel the order anymore"); return and exchange need 'delivered'.
- ``[once_per_order]``: items of an order are modified at most once, an order is exchanged at
  most once ("exchange or modify order tools can only be called once per order").
- ``[variant_match]``: every new item is an available variant of the same product, different
  from the old item.
- ``[payment_method]``: payment methods come from the user's profile; a payment change picks a
  method different from the original; a refund goes to the original method or a gift card.
- ``[payment_balance]``: a gift card covers the amount it pays (the order total, or the price
  difference of an item modification or exchange).
- ``[cancel_reason]``: the reason is 'no longer needed' or 'ordered by mistake'.

``OFFICIAL_WAIVERS`` lists the official tau2 tasks whose gold actions contradict a rule (see
there); the verifier waives exactly those rules for exactly those unmodified tasks.
"""
from __future__ import annotations

from evosyn.envs.base import Episode
from evosyn.envs.policies.common import confirmation_rule
from evosyn.envs.replay import pair_tool_calls
from evosyn.envs.tau2.cow import peek
from evosyn.storage.records import Message, ToolCall

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
AUTH_TOOLS = ("find_user_id_by_email", "find_user_id_by_name_zip")
ORDER_WRITES = ("cancel_pending_order", "modify_pending_order_items", "modify_pending_order_address",
                "modify_pending_order_payment", "return_delivered_order_items", "exchange_delivered_order_items")

# tau2 lists only the state-changing actions for these tasks (its later, harder tasks): the gold
# trajectory built from them has no authentication lookup and no order lookup before the writes
_WRITES_ONLY = ("36", "70", "71", "72", "73", "74", "75", "76", "77", "78", "79", "80", "81", "82", "83", "84",
                "85", "86", "87", "88", "89", "90", "91", "92", "93", "94", "95", "96", "97", "98", "99", "100",
                "101", "102", "103", "104", "105", "106", "107", "108", "109", "110", "111", "112", "113")
_WRITES_ONLY_REASON = "tau2 lists only the writes of this task, without the authentication and order lookups"
OFFICIAL_WAIVERS: dict[str, dict[str, str]] = {
    tid: {"authentication": _WRITES_ONLY_REASON, "status_check": _WRITES_ONLY_REASON} for tid in _WRITES_ONLY}
_SAME_ITEM = "the gold exchange keeps one item as it is (new item id equal to the old one), which the tool accepts"
for _tid, _rules in {
    # gold writes that the tool itself rejects (the agent tries, the tool refuses, the state does not change)
    "12": {"payment_method": "the gold return asks a refund to PayPal for a credit-card order; the tool refuses"},
    "13": {"payment_method": "the gold return asks a refund to PayPal for a credit-card order; the tool refuses"},
    "64": {"order_status": "the gold tries to exchange pending order #W7464385 first; the tool refuses"},
    "105": {"payment_balance": "the gold exchange is paid by a gift card with too little balance; the tool refuses"},
    "18": {"variant_match": _SAME_ITEM}, "91": {"variant_match": _SAME_ITEM}, "107": {"variant_match": _SAME_ITEM},
    # the gold acts on an order it never looked up (the user gave its details)
    "29": {"status_check": "the gold exchanges #W7181492 without looking it up"},
    "35": {"status_check": "the gold returns #W8528674 without looking it up"},
    "37": {"status_check": "the gold modifies #W9348897 without looking it up"},
    "38": {"status_check": "the gold cancels #W9348897 without looking it up"},
}.items():
    OFFICIAL_WAIVERS.setdefault(_tid, {}).update(_rules)


def _db(episode: Episode):
    return episode.env.tools.db  # type: ignore[attr-defined]


def lookups(history: list[Message]) -> list[tuple[ToolCall, str]]:
    """(call, observation) of every successful assistant tool call in the history, in order."""
    pairs, _ = pair_tool_calls(history)
    return [(call, (answer.content or "").strip().strip('"')) for call, answer in pairs
            if answer is not None and not answer.error and call.requestor == "assistant"]


def authenticated_user(history: list[Message]) -> str | None:
    """The user id the first successful identity lookup returned (one user per conversation)."""
    return next((content for call, content in lookups(history) if call.name in AUTH_TOOLS), None)


def price_difference(db, order, item_ids: list[str], new_item_ids: list[str]) -> float:
    diff = 0.0
    for old_id, new_id in zip(item_ids, new_item_ids):
        item = next((i for i in order.items if i.item_id == old_id), None)
        product = peek(db.products, item.product_id) if item else None
        variant = product.variants.get(new_id) if product else None
        if item is not None and variant is not None:
            diff += variant.price - item.price
    return round(diff, 2)


def _variant_rules(db, call: ToolCall, order) -> list[str]:
    args = call.arguments
    old_ids, new_ids = list(args.get("item_ids") or []), list(args.get("new_item_ids") or [])
    out = []
    if len(old_ids) != len(new_ids) or not old_ids:
        out.append(f"[variant_match] {call.name}: each item needs exactly one new item")
    for old_id, new_id in zip(old_ids, new_ids):
        item = next((i for i in order.items if i.item_id == old_id), None)
        if item is None:
            continue  # the tool itself reports an item not in the order
        product = peek(db.products, item.product_id)
        variant = product.variants.get(new_id) if product else None
        if variant is None:
            out.append(f"[variant_match] {call.name}: {new_id} is not a variant of {item.name} ({item.product_id}); "
                       f"the product type cannot change")
        elif new_id == old_id:
            out.append(f"[variant_match] {call.name}: {new_id} is the same item, not a different option")
        elif not variant.available:
            out.append(f"[variant_match] {call.name}: {new_id} ({item.name}) is not available")
    return out


def _gift_balance(user, payment_id: str, need: float, name: str) -> list[str]:
    method = user.payment_methods.get(payment_id) if user else None
    if method is not None and method.source == "gift_card" and method.balance < need:
        return [f"[payment_balance] {name}: gift card {payment_id} holds {method.balance}, less than {need}"]
    return []


def _payment_rules(db, call: ToolCall, order, user) -> list[str]:
    args, name = call.arguments, call.name
    pay = args.get("payment_method_id", "")
    if user is None or pay not in user.payment_methods:
        return [f"[payment_method] {name}: {pay!r} is not a payment method on the user's profile"]
    original = order.payment_history[0].payment_method_id if order.payment_history else None
    if name == "modify_pending_order_payment":
        if pay == original:
            return [f"[payment_method] {name}: {pay} is already the order's payment method"]
        amount = order.payment_history[0].amount if order.payment_history else 0.0
        return _gift_balance(user, pay, amount, name)
    if name == "return_delivered_order_items":
        if pay != original and user.payment_methods[pay].source != "gift_card":
            return [(f"[payment_method] {name}: refunds go to the original payment method ({original}) "
                    f"or a gift card, not {pay}")]
        return []
    diff = price_difference(db, order, list(args.get("item_ids") or []), list(args.get("new_item_ids") or []))
    return _gift_balance(user, pay, diff, name)


def _order_rules(db, call: ToolCall, order) -> list[str]:
    name, status, args = call.name, order.status, call.arguments
    out = []
    if name == "cancel_pending_order":
        if status != "pending":
            out.append(f"[order_status] {name}: the order is {status!r}; only pending orders can be cancelled")
        if args.get("reason") not in CANCEL_REASONS:
            out.append(f"[cancel_reason] {name}: {args.get('reason')!r} is not an accepted reason "
                       f"({' or '.join(CANCEL_REASONS)})")
    elif name == "modify_pending_order_items":
        if status == "pending (item modified)":
            out.append(f"[once_per_order] {name}: the items of this order were already modified once")
        elif status != "pending":
            out.append(f"[order_status] {name}: the order is {status!r}; only pending orders can be modified")
    elif name in ("modify_pending_order_address", "modify_pending_order_payment"):
        if status != "pending":
            out.append(f"[order_status] {name}: the order is {status!r}; only pending orders whose items were "
                       f"not modified can be modified")
    elif name == "exchange_delivered_order_items" and order.exchange_items:
        out.append(f"[once_per_order] {name}: this order was already exchanged once")
    elif status != "delivered":
        out.append(f"[order_status] {name}: the order is {status!r}; only delivered orders can be "
                   f"{'returned' if name.startswith('return') else 'exchanged'}")
    if name in ("modify_pending_order_items", "exchange_delivered_order_items"):
        out += _variant_rules(db, call, order)
    if name != "cancel_pending_order" and name != "modify_pending_order_address":
        out += _payment_rules(db, call, order, peek(db.users, order.user_id))
    return out


def check_write(episode: Episode, call: ToolCall, history: list[Message]) -> list[str]:
    out = confirmation_rule(episode, call, history)
    if call.requestor != "assistant":
        return out
    db = _db(episode)
    who = authenticated_user(history)
    if call.name in ORDER_WRITES:
        order = peek(db.orders, call.arguments.get("order_id", ""))
        if order is None:
            return out  # the tool itself reports a missing order
        if who is None:
            out.append(f"[authentication] {call.name}: the user was not authenticated (email, or name and zip)")
        elif who != order.user_id:
            out.append(f"[authentication] {call.name}: order {order.order_id} belongs to another user, not {who}")
        looked_up = any(c.name == "get_order_details" and c.arguments.get("order_id") == order.order_id
                        for c, _ in lookups(history))
        if not looked_up:
            out.append(f"[status_check] {call.name}: order {order.order_id} was not looked up before acting on it")
        out += _order_rules(db, call, order)
    elif call.name == "modify_user_address":
        if who is None:
            out.append(f"[authentication] {call.name}: the user was not authenticated (email, or name and zip)")
        elif who != call.arguments.get("user_id"):
            out.append(f"[authentication] {call.name}: {call.arguments.get('user_id')!r} is not the "
                       f"authenticated user {who}")
    return out


def describe(violation: str) -> str:
    """The rule text without its code (for refusal explanations)."""
    return violation.split("] ", 1)[-1] if violation.startswith("[") else violation


RULE_FOCUS: dict[str, str] = {  # rule code -> policy_or_constraint_focus of the retail initial space
    "order_status": "order_status_precondition", "status_check": "order_status_precondition",
    "authentication": "identity_authentication", "once_per_order": "once_per_order_action_lock",
    "variant_match": "product_variant_match", "payment_method": "payment_or_giftcard_balance",
    "payment_balance": "payment_or_giftcard_balance", "confirmation": "confirmation_requirement",
    "cancel_reason": "cancellation_reason_validity",
}

