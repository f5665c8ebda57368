"""Requests the retail policy declines, found in the real DB: one builder per (family, rule).

Each builder finds, for one user, a concrete request that breaks a named rule and
returns it with the call a careless agent would make (checked by
``evosyn.domains.retail.policy.check_write`` in the tests), the lookups an agent needs to
see that the rule applies, and, for the once-per-order lock, the earlier
modification as a tau2 ``initial_state``. A categorical refusal (``lookups`` empty)
is visible from the request alone.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evosyn.domains.retail.ops import (
    ADDRESS_FIELDS,
    Action,
    address_text,
    db_of,
    new_address,
    options_text,
    order_read,
    other_variants,
    product_read,
    user_orders,
    user_read,
)
from evosyn.domains.retail.policy import RULE_FOCUS, price_difference
from evosyn.envs.tau2.cow import peek


@dataclass
class Refusal:
    code: str  # the rule code of domains.retail.policy
    say: str  # how the user asks
    rule: str  # why the agent must decline
    tool: str  # the call the request asks for
    arguments: dict[str, Any]
    lookups: list[Action] = field(default_factory=list)  # after authentication
    initial_state: dict[str, Any] | None = None


BAD_REASONS = ("you found a cheaper price elsewhere", "the delivery is taking too long",
               "you changed your mind about the colour")


def _first(orders: list, rng: random.Random) -> Any | None:
    return rng.choice(orders) if orders else None


def _swap(db, order, rng, available: bool = True) -> tuple[Any, Any] | None:
    pairs = [(i, v) for i in order.items for v in other_variants(db, i, available)]
    return rng.choice(pairs) if pairs else None


def _swap_args(order, item, variant, pay: str) -> dict[str, Any]:
    return {"order_id": order.order_id, "item_ids": [item.item_id], "new_item_ids": [variant.item_id],
            "payment_method_id": pay}


def _original(order) -> str:
    return order.payment_history[0].payment_method_id


# ------------------------------------------------------------------ order_cancellation
def cancel_status(episode, user, rng) -> Refusal | None:
    order = _first(user_orders(db_of(episode), user.user_id, ("processed", "delivered", "cancelled")), rng)
    if order is None:
        return None
    oid = order.order_id
    return Refusal("order_status", f"cancel order {oid} because you no longer need it",
                   f"order {oid} is {order.status}; only pending orders can be cancelled", "cancel_pending_order",
                   {"order_id": oid, "reason": "no longer needed"}, [order_read(oid)])


def cancel_reason(episode, user, rng) -> Refusal | None:
    order = _first(user_orders(db_of(episode), user.user_id, ("pending",)), rng)
    if order is None:
        return None
    oid, why = order.order_id, rng.choice(BAD_REASONS)
    return Refusal("cancel_reason", f"cancel order {oid} because {why} (that is your only reason)",
                   "an order is cancelled only because it is no longer needed or was ordered by mistake",
                   "cancel_pending_order", {"order_id": oid, "reason": why.replace("you ", "I ", 1)})


# ------------------------------------------------------------------ item modification and exchange
def _status_swap(kind: str, statuses: tuple[str, ...]) -> Callable:
    def build(episode, user, rng) -> Refusal | None:
        db = db_of(episode)
        for order in rng.sample(user_orders(db, user.user_id, statuses), len(user_orders(db, user.user_id, statuses))):
            pick = _swap(db, order, rng)
            if pick is None:
                continue
            item, v = pick
            verb, tool, need = (("modify", "modify_pending_order_items", "pending") if kind == "items" else
                                ("exchange", "exchange_delivered_order_items", "delivered"))
            return Refusal("order_status", f"{verb} the {item.name} in order {order.order_id} for the one with "
                           f"{options_text(v.options)}", f"order {order.order_id} is {order.status}; only {need} "
                           f"orders can be {'modified' if kind == 'items' else 'exchanged'}", tool,
                           _swap_args(order, item, v, _original(order)), [order_read(order.order_id)])
        return None
    return build


def _other_product(kind: str, status: str) -> Callable:
    def build(episode, user, rng) -> Refusal | None:
        db = db_of(episode)
        order = _first(user_orders(db, user.user_id, (status,)), rng)
        if order is None:
            return None
        item = rng.choice(order.items)
        others = sorted(p for p in db.products if p != item.product_id)
        product = peek(db.products, rng.choice(others))
        variants = sorted((v for v in product.variants.values() if v.available), key=lambda v: v.item_id)
        if not variants:
            return None
        verb, tool = (("modify", "modify_pending_order_items") if kind == "items" else
                      ("exchange", "exchange_delivered_order_items"))
        return Refusal("variant_match", f"{verb} the {item.name} in order {order.order_id} into a {product.name} "
                       f"({options_text(variants[0].options)}) instead", "an item can only become another option "
                       "of the same product, never a different product type", tool,
                       _swap_args(order, item, variants[0], _original(order)))
    return build


def _unavailable(kind: str, status: str) -> Callable:
    def build(episode, user, rng) -> Refusal | None:
        db = db_of(episode)
        for order in user_orders(db, user.user_id, (status,)):
            pick = _swap(db, order, rng, available=False)
            if pick is None:
                continue
            item, v = pick
            verb, tool = (("modify", "modify_pending_order_items") if kind == "items" else
                          ("exchange", "exchange_delivered_order_items"))
            return Refusal("variant_match", f"{verb} the {item.name} ({options_text(item.options)}) in order "
                           f"{order.order_id} for the one with {options_text(v.options)}",
                           f"the {item.name} with {options_text(v.options)} is not available", tool,
                           _swap_args(order, item, v, _original(order)),
                           [order_read(order.order_id), product_read(item.product_id)])
        return None
    return build


def _low_balance(kind: str, status: str) -> Callable:
    def build(episode, user, rng) -> Refusal | None:
        db = db_of(episode)
        gifts = sorted(k for k, m in user.payment_methods.items() if m.source == "gift_card")
        for order in user_orders(db, user.user_id, (status,)):
            for item in order.items:
                for v in other_variants(db, item):
                    diff = price_difference(db, order, [item.item_id], [v.item_id])
                    low = [g for g in gifts if user.payment_methods[g].balance < diff]
                    if not low:
                        continue
                    verb, tool = (("modify", "modify_pending_order_items") if kind == "items" else
                                  ("exchange", "exchange_delivered_order_items"))
                    return Refusal("payment_balance", f"{verb} the {item.name} ({options_text(item.options)}) in "
                                   f"order {order.order_id} for the one with {options_text(v.options)}, paying the "
                                   f"difference with {low[0]} only", f"gift card {low[0]} holds "
                                   f"{user.payment_methods[low[0]].balance}, less than the difference {diff}",
                                   tool, _swap_args(order, item, v, low[0]),
                                   [order_read(order.order_id), product_read(item.product_id),
                                    user_read(user.user_id)])
        return None
    return build


def items_once(episode, user, rng) -> Refusal | None:
    """A second item modification of an order whose items were modified before the call (initial_state)."""
    db = db_of(episode)
    for order in user_orders(db, user.user_id, ("pending",)):
        first = _swap(db, order, rng)
        if first is None:
            continue
        item, v = first
        args = _swap_args(order, item, v, _original(order))
        if episode.step("modify_pending_order_items", args).error:
            continue
        changed = peek(db.orders, order.order_id)
        second = _swap(db, changed, rng)
        if second is None:
            continue
        item2, v2 = second
        state = {"initialization_data": None, "message_history": None, "initialization_actions": [
            {"env_type": "assistant", "func_name": "modify_pending_order_items", "arguments": args}]}
        return Refusal("once_per_order", f"modify the {item2.name} in order {order.order_id} for the one with "
                       f"{options_text(v2.options)} (you already had its items changed once, earlier)",
                       f"the items of order {order.order_id} were already modified once; they cannot be modified "
                       f"again", "modify_pending_order_items", _swap_args(changed, item2, v2, _original(changed)),
                       [order_read(order.order_id)], initial_state=state)
    return None


# ------------------------------------------------------------------ logistics, return, profile
def address_status(episode, user, rng) -> Refusal | None:
    db = db_of(episode)
    order = _first(user_orders(db, user.user_id, ("processed", "delivered")), rng)
    if order is None:
        return None
    addr = new_address(db, user.user_id, order.address.model_dump(), rng)
    return Refusal("order_status", f"change the shipping address of order {order.order_id} to {address_text(addr)}",
                   f"order {order.order_id} is {order.status}; only pending orders can be modified",
                   "modify_pending_order_address", {"order_id": order.order_id, **{k: addr[k] for k in ADDRESS_FIELDS}},
                   [order_read(order.order_id)])


def payment_balance(episode, user, rng) -> Refusal | None:
    for order in user_orders(db_of(episode), user.user_id, ("pending",)):
        amount = order.payment_history[0].amount
        low = sorted(k for k, m in user.payment_methods.items() if m.source == "gift_card" and m.balance < amount
                     and k != _original(order))
        if len(order.payment_history) == 1 and low:
            return Refusal("payment_balance", f"switch the payment of order {order.order_id} to {low[0]}",
                           f"gift card {low[0]} holds {user.payment_methods[low[0]].balance}, less than the order "
                           f"total {amount}", "modify_pending_order_payment",
                           {"order_id": order.order_id, "payment_method_id": low[0]},
                           [order_read(order.order_id), user_read(user.user_id)])
    return None


def return_status(episode, user, rng) -> Refusal | None:
    order = _first(user_orders(db_of(episode), user.user_id, ("pending", "processed")), rng)
    if order is None:
        return None
    item = rng.choice(order.items)
    return Refusal("order_status", f"return the {item.name} from order {order.order_id}",
                   f"order {order.order_id} is {order.status}; only delivered orders can be returned",
                   "return_delivered_order_items", {"order_id": order.order_id, "item_ids": [item.item_id],
                                                    "payment_method_id": _original(order)},
                   [order_read(order.order_id)])


def return_method(episode, user, rng) -> Refusal | None:
    for order in user_orders(db_of(episode), user.user_id, ("delivered",)):
        other = sorted(k for k, m in user.payment_methods.items() if m.source != "gift_card" and k != _original(order))
        if other:
            item = rng.choice(order.items)
            return Refusal("payment_method", f"return the {item.name} from order {order.order_id} with the refund "
                           f"going to {other[0]}", f"a refund goes to the original payment method "
                           f"({_original(order)}) or a gift card, not {other[0]}", "return_delivered_order_items",
                           {"order_id": order.order_id, "item_ids": [item.item_id], "payment_method_id": other[0]},
                           [order_read(order.order_id)])
    return None


def other_user(episode, user, rng) -> Refusal | None:
    db = db_of(episode)
    friend = peek(db.users, rng.choice(sorted(u for u in db.users if u != user.user_id)))
    if not friend.orders:
        return None
    oid = rng.choice(friend.orders)
    name = f"{friend.name.first_name} {friend.name.last_name}"
    return Refusal("authentication", f"know the status of order {oid}, which belongs to your friend {name}",
                   "the agent helps only the authenticated user and cannot share another customer's orders",
                   "get_order_details", {"order_id": oid})


REFUSALS: dict[str, list[tuple[str, Callable]]] = {  # family -> (rule code, builder)
    "order_cancellation": [("order_status", cancel_status), ("cancel_reason", cancel_reason)],
    "order_item_modification": [("order_status", _status_swap("items", ("processed", "delivered"))),
                                ("variant_match", _other_product("items", "pending")),
                                ("variant_match", _unavailable("items", "pending")),
                                ("payment_balance", _low_balance("items", "pending")), ("once_per_order", items_once)],
    "order_logistics_modification": [("order_status", address_status), ("payment_balance", payment_balance)],
    "return_delivered_order": [("order_status", return_status), ("payment_method", return_method)],
    "exchange_delivered_order": [("order_status", _status_swap("exchange", ("pending", "processed"))),
                                 ("variant_match", _other_product("exchange", "delivered")),
                                 ("variant_match", _unavailable("exchange", "delivered")),
                                 ("payment_balance", _low_balance("exchange", "delivered"))],
    "profile_or_inquiry": [("authentication", other_user)],
}

# the policy foci a refusal of each family can break (for the planner's compatibility rules)
VIOLABLE: dict[str, list[str]] = {family: sorted({RULE_FOCUS[code] for code, _ in builders})
                                  for family, builders in REFUSALS.items()}
# families with a categorical refusal, visible from the request alone (num_read 0)
NO_READ_REFUSALS = ["order_cancellation", "order_item_modification", "exchange_delivered_order", "profile_or_inquiry"]
