"""State-changing operations the embedded retail generator composes, found in the real DB.

Each ``Op`` is one gold write plus the reads that justify it under the retail
policy: the order is looked up before it is acted on (its status), the product
before an item is swapped for another variant (the new item id, its
availability and price), the profile before a gift card pays (its balance).
Ops are proposed from the live episode state, so a second op on the same order
sees the effect of the first (a cancelled order takes no more changes, an
order whose items were modified is locked).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from evosyn.domains.retail.policy import CANCEL_REASONS, price_difference
from evosyn.envs.tau2.cow import peek

Action = tuple

FAMILY_OF_OP = {"cancel": "order_cancellation", "items": "order_item_modification",
                "address": "order_logistics_modification", "payment": "order_logistics_modification",
                "return": "return_delivered_order", "exchange": "exchange_delivered_order",
                "profile": "profile_or_inquiry"}
REASON_SAY = {"no longer needed": "you no longer need it", "ordered by mistake": "you ordered it by mistake"}
ADDRESS_FIELDS = ("address1", "address2", "city", "state", "country", "zip")


@dataclass
class Op:
    kind: str
    tool: str
    arguments: dict[str, Any]
    reads: list[Action]
    say: str  # how the user asks for it
    info: list[str] = field(default_factory=list)  # what the agent must tell the user
    order_id: str | None = None


def db_of(episode):
    return episode.env.tools.db


def order_read(order_id: str) -> Action:
    return ("get_order_details", {"order_id": order_id})


def product_read(product_id: str) -> Action:
    return ("get_product_details", {"product_id": product_id})


def user_read(user_id: str) -> Action:
    return ("get_user_details", {"user_id": user_id})


def options_text(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


def address_text(address: dict[str, str]) -> str:
    parts = [address["address1"], address["address2"], address["city"], address["state"], address["zip"],
             address["country"]]
    return ", ".join(p for p in parts if p)


def user_orders(db, user_id: str, statuses: tuple[str, ...] | None = None) -> list:
    user = peek(db.users, user_id)
    orders = [peek(db.orders, oid) for oid in (user.orders if user else [])]
    return [o for o in orders if o is not None and (statuses is None or o.status in statuses)]


def other_variants(db, item, available: bool = True) -> list:
    product = peek(db.products, item.product_id)
    return sorted((v for v in product.variants.values() if v.item_id != item.item_id and v.available == available),
                  key=lambda v: v.item_id) if product else []


def payment_choice(user, need: float, rng: random.Random, exclude: tuple[str, ...] = ()) -> str | None:
    """A profile payment method that can pay ``need`` (a gift card needs the balance), or None."""
    ok = sorted(k for k, m in user.payment_methods.items() if k not in exclude and (
        m.source != "gift_card" or m.balance >= need))
    return rng.choice(ok) if ok else None


def new_address(db, user_id: str, current: dict[str, str], rng: random.Random) -> dict[str, str]:
    """A real address from the DB (another customer's default address), different from ``current``."""
    others = sorted(u for u in db.users if u != user_id)
    for _ in range(10):
        addr = peek(db.users, rng.choice(others)).address.model_dump()
        if addr != current:
            return {k: addr[k] for k in ADDRESS_FIELDS}
    raise RuntimeError("no other address found in the retail DB")


def _swaps(db, order, rng: random.Random) -> list[tuple[Any, Any]]:
    """1 or 2 (item, new variant) pairs of distinct items, each to another available variant of its product."""
    seen, pairs = set(), []
    for item in rng.sample(order.items, len(order.items)):
        if item.item_id in seen:
            continue
        seen.add(item.item_id)
        variants = other_variants(db, item)
        if variants:
            pairs.append((item, rng.choice(variants)))
    return pairs[:rng.choice([1, 1, 2])] if pairs else []


def _swap_op(kind: str, db, user, order, rng: random.Random) -> Op | None:
    pairs = _swaps(db, order, rng)
    if not pairs:
        return None
    old, new = [i.item_id for i, _ in pairs], [v.item_id for _, v in pairs]
    diff = price_difference(db, order, old, new)
    pay = payment_choice(user, max(diff, 0.0), rng)
    if pay is None:
        return None
    tool = "modify_pending_order_items" if kind == "items" else "exchange_delivered_order_items"
    products = list(dict.fromkeys(i.product_id for i, _ in pairs))
    reads = [order_read(order.order_id)] + [product_read(p) for p in products]
    if user.payment_methods[pay].source == "gift_card":  # the balance must cover the difference
        reads.append(user_read(user.user_id))
    verb = "change" if kind == "items" else "exchange"
    what = " and ".join(f"the {i.name} ({options_text(i.options)}) for the one with {options_text(v.options)}"
                        for i, v in pairs)
    say = f"{verb} {what} in order {order.order_id} (use {pay} for the price difference)"
    return Op(kind, tool, {"order_id": order.order_id, "item_ids": old, "new_item_ids": new,
                           "payment_method_id": pay}, reads, say, order_id=order.order_id)


def propose(kind: str, episode, user_id: str, rng: random.Random, touched: set[str], reuse_first: bool,
            done: set[tuple[str, str]]) -> Op | None:
    """One feasible op of ``kind`` for this user in the current state, or None.

    ``reuse_first`` tries the orders already looked up first (a tight read budget); ``done``
    holds (kind, order id) pairs already planned, so no request repeats.
    """
    db = db_of(episode)
    user = peek(db.users, user_id)
    if kind == "profile":
        if ("profile", user_id) in done:
            return None
        addr = new_address(db, user_id, user.address.model_dump(), rng)
        return Op("profile", "modify_user_address", {"user_id": user_id, **addr}, [],
                  f"change the default address on your profile to {address_text(addr)}")
    statuses = ("delivered",) if kind in ("return", "exchange") else ("pending",)
    orders = user_orders(db, user_id, statuses)
    rng.shuffle(orders)
    if reuse_first:
        orders.sort(key=lambda o: o.order_id not in touched)
    for order in orders:
        oid = order.order_id
        if (kind, oid) in done:
            continue
        if kind == "cancel":
            reason = rng.choice(CANCEL_REASONS)
            return Op("cancel", "cancel_pending_order", {"order_id": oid, "reason": reason}, [order_read(oid)],
                      f"cancel order {oid} because {REASON_SAY[reason]}", order_id=oid)
        if kind in ("items", "exchange"):
            op = _swap_op(kind, db, user, order, rng)
            if op is not None:
                return op
        elif kind == "address":
            current = order.address.model_dump()
            default = user.address.model_dump()
            if default != current and rng.random() < 0.5:
                addr, where = default, "your default address"
                reads = [order_read(oid), user_read(user_id)]
            else:
                addr = new_address(db, user_id, current, rng)
                where, reads = address_text(addr), [order_read(oid)]
            return Op("address", "modify_pending_order_address", {"order_id": oid, **{k: addr[k] for k in ADDRESS_FIELDS}},
                      reads, f"ship order {oid} to {where} instead", order_id=oid)
        elif kind == "payment":
            if len(order.payment_history) != 1 or order.payment_history[0].transaction_type != "payment":
                continue
            original = order.payment_history[0].payment_method_id
            pay = payment_choice(user, order.payment_history[0].amount, rng, exclude=(original,))
            if pay is None:
                continue
            return Op("payment", "modify_pending_order_payment", {"order_id": oid, "payment_method_id": pay},
                      [order_read(oid), user_read(user_id)], f"pay for order {oid} with {pay} instead of {original}",
                      order_id=oid)
        elif kind == "return":
            items = rng.sample(order.items, rng.randint(1, min(2, len(order.items))))
            original = order.payment_history[0].payment_method_id
            gifts = sorted(k for k, m in user.payment_methods.items() if m.source == "gift_card" and k != original)
            pay = rng.choice(gifts) if gifts and rng.random() < 0.3 else original
            reads = [order_read(oid)] + ([user_read(user_id)] if pay != original else [])
            names = " and ".join(f"the {i.name} ({options_text(i.options)})" for i in items)
            return Op("return", "return_delivered_order_items",
                      {"order_id": oid, "item_ids": [i.item_id for i in items], "payment_method_id": pay}, reads,
                      f"return {names} from order {oid} (refund to {pay})", order_id=oid)
    return None
