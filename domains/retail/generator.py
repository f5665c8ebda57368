"""Embedded retail Generator: builds executable tau2 tasks from the real retail DB.

Every task starts with the authentication the policy demands (the user gives an
email, or a name and zip code, and the agent looks the user id up). For a
fulfilment it composes state-changing ops (``ops.py``) for one user and executes
them on a fresh episode while planning, so every gold write is known to succeed
and to change state; several requests of the same user (other orders, the
profile address) make the multi-write tasks. A fulfilment without writes is an
information request whose answer the lookups give. For a refusal it finds a
request of the user that breaks a named rule (``refusals.py``). The number of
writes and reads follows ``num_write`` / ``num_read`` exactly when those factors
are selected, and otherwise the default prior and the difficulty's call range.
"""
from __future__ import annotations

import random
from typing import Any

from evosyn.agents.plans import (
    DEFAULT_PRIOR,
    Action,
    DefaultPrior,
    Infeasible,
    Plan,
    action_key,
    fit_reads,
    linked,
    ops_in_order,
    sample_new,
    sample_up_to,
    targets,
    unique_actions,
    weighted_order,
)
from evosyn.domains.retail.ops import (
    Op,
    options_text,
    order_read,
    other_variants,
    product_read,
    propose,
    user_orders,
    user_read,
)
from evosyn.domains.retail.policy import RULE_FOCUS, price_difference
from evosyn.domains.retail.refusals import REFUSALS
from evosyn.envs.base import Domain

PRIMARY_OPS = {"order_cancellation": ["cancel"], "order_item_modification": ["items"],
               "order_logistics_modification": ["address", "payment"], "return_delivered_order": ["return"],
               "exchange_delivered_order": ["exchange"], "profile_or_inquiry": ["profile"]}
# follow-up requests of multi-write tasks, weighted toward the common ones
SECONDARY_OPS = {"address": 3.0, "cancel": 3.0, "return": 3.0, "payment": 2.0, "exchange": 2.0, "items": 2.0,
                 "profile": 1.0}

READ_COST = {"profile": 0, "address": 1, "cancel": 1, "return": 1, "payment": 2, "items": 2, "exchange": 2}


class RetailGenerator:
    def __init__(self, domain: Domain, prior: DefaultPrior = DEFAULT_PRIOR, user_tries: int = 40):
        self.domain = domain
        self.prior = prior
        self.user_tries = user_tries
        self.base = domain.cow.base  # type: ignore[attr-defined]
        self.user_ids = sorted(self.base.users)

    def plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan:
        t = targets(sel, blueprint_id, seed, self.prior)
        rng, family, outcome, writes = t.rng, t.family, t.outcome, t.writes
        if t.reads == 0 and outcome == "fulfill":
            raise Infeasible("a fulfilment needs the authentication lookup (num_read at least 1)")
        users = [u for u in self.user_ids if self._capacity(u) >= writes] if outcome == "fulfill" else self.user_ids
        for user_id in rng.sample(users, min(self.user_tries, len(users))):
            want, exact = t.reads_for_try(), t.exact
            if outcome == "refuse":
                plan = self._refusal(family, user_id, want, rng, exact, sel.get("policy_or_constraint_focus", []))
            elif writes == 0:
                plan = self._information(family, user_id, want, rng, exact)
            else:
                plan = self._fulfilment(family, user_id, writes, want, rng, exact)
            if plan is not None:
                return plan
        raise t.exhausted("user", self.user_tries)

    def _capacity(self, user_id: str) -> int:
        """At most how many writes this user's orders and profile can take (address, payment and items or
        cancellation per pending order, a return or exchange per delivered order, the profile address)."""
        orders = [self.base.orders[o] for o in self.base.users[user_id].orders]
        return 1 + sum(3 if o.status == "pending" else 1 if o.status == "delivered" else 0 for o in orders)

    # ------------------------------------------------------------ identity
    def _identity(self, user_id: str, rng: random.Random) -> tuple[Action, str]:
        """The authentication lookup and how the user identifies (email, or name and zip when unique)."""
        user = self.base.users[user_id]
        first, last, zip_ = user.name.first_name, user.name.last_name, user.address.zip
        owner = next(u for u in self.base.users.values() if u.name.first_name.lower() == first.lower()
                     and u.name.last_name.lower() == last.lower() and u.address.zip == zip_)
        if rng.random() < 0.5 and owner.user_id == user_id:
            return (("find_user_id_by_name_zip", {"first_name": first, "last_name": last, "zip": zip_}),
                    f"You are {first} {last} and your zip code is {zip_}. You do not remember your email address.")
        return ("find_user_id_by_email", {"email": user.email}), f"Your email is {user.email}."

    # ------------------------------------------------------------ fulfilment
    def _fulfilment(self, family, user_id, writes, reads, rng, exact) -> Plan | None:
        episode = self.domain.episode()
        auth, known = self._identity(user_id, rng)
        ops: list[Op] = []
        required = {action_key(auth)}
        touched: set[str] = set()
        done: set[tuple[str, str]] = set()
        kinds = list(PRIMARY_OPS[family])
        rng.shuffle(kinds)
        for n in range(writes):
            budget = reads - len(required)
            tight = exact and budget < 2 * (writes - n)
            pool = kinds if n == 0 else weighted_order(rng, SECONDARY_OPS)
            if tight:  # a tight read budget: the requests that need fewer new lookups first
                pool.sort(key=lambda k: READ_COST[k])
            chosen = None
            for kind in pool:
                with episode.reading():  # proposing only reads the episode's state
                    op = propose(kind, episode, user_id, rng, touched, tight, done)
                if op is None:
                    continue
                new = {action_key(r) for r in op.reads} - required
                if exact and len(new) > budget:
                    continue
                before = episode.state_digest()
                if episode.step(op.tool, op.arguments).error or episode.state_digest() == before:
                    continue
                chosen = op
                break
            if chosen is None:
                return None
            ops.append(chosen)
            required |= {action_key(r) for r in chosen.reads}
            target = chosen.order_id or user_id
            touched.add(target)
            done |= {(chosen.kind, target), ("cancel", target)}  # no repeated request, no cancel after a change
        return self._assemble(user_id, auth, known, ops, reads, rng, exact)

    def _assemble(self, user_id, auth, known, ops: list[Op], reads, rng, exact) -> Plan | None:
        op_reads = unique_actions(r for op in ops for r in op.reads)
        need = 1 + len(op_reads)
        reads = fit_reads(need, reads, exact)
        if reads is None:
            return None
        seen = {action_key(auth)} | {action_key(r) for r in op_reads}
        fillers = self._fillers(user_id, seen, reads - need, rng)
        if fillers is None:
            return None
        steps, intents = ops_in_order(ops)
        return Plan(user_id=user_id, actions=[auth, *fillers, *steps], intents=intents, info=[i for op in ops for i in op.info],
                    fillers=[self._filler_say(f) for f in fillers], known_info=known, identity=identity_line(known))

    def _fillers(self, user_id, seen: set[str], n: int, rng) -> list[Action] | None:
        if n <= 0:
            return []
        user = self.base.users[user_id]
        pool: list[Action] = [user_read(user_id)] + [order_read(o) for o in user.orders]
        for oid in user.orders[:2]:  # a few product lookups, so order lookups are not drowned out
            pool += [product_read(i.product_id) for i in self.base.orders[oid].items[:2]]
        return sample_new(rng, pool, seen, n)

    def _filler_say(self, action: Action) -> str:
        name, args = action
        if name == "get_user_details":
            return "read out what is on my profile"
        if name == "get_order_details":
            return f"check the details of order {args['order_id']}"
        product = self.base.products[args["product_id"]]
        return f"look up the {product.name} (product id {args['product_id']}) and its options"

    # ------------------------------------------------------------ information (no writes)
    def _questions(self, family: str, user, rng) -> list[tuple[list[Action], str, list[str], dict[str, Any]]]:
        """(lookups after authentication, question, answer, ids) the family can ask about this user."""
        db = self.base
        pending, delivered = (user_orders(db, user.user_id, (s,)) for s in ("pending", "delivered"))
        out: list[tuple[list[Action], str, list[str], dict[str, Any]]] = []
        if family == "profile_or_inquiry":
            out.append(([], "ask what your user id is", [user.user_id], {}))
            orders = user_orders(db, user.user_id)
            if orders:
                o = rng.choice(orders)
                out.append(([order_read(o.order_id)], f"ask for the status of order {o.order_id}", [o.status],
                            {"order_id": o.order_id}))
                tracked = [o for o in orders if o.fulfillments]
                if tracked:
                    t = rng.choice(tracked)
                    out.append(([order_read(t.order_id)], f"ask for the tracking number of order {t.order_id}",
                                [t.fulfillments[0].tracking_id[0]], {"order_id": t.order_id}))
            gifts = sorted(k for k, m in user.payment_methods.items() if m.source == "gift_card")
            if gifts:
                g = rng.choice(gifts)
                out.append(([user_read(user.user_id)], f"ask for the balance of your gift card {g}",
                            [str(user.payment_methods[g].balance)], {"payment_method_id": g}))
        elif family == "order_cancellation" and pending:
            o = rng.choice(pending)
            total = round(sum(p.amount for p in o.payment_history if p.transaction_type == "payment"), 2)
            out.append(([order_read(o.order_id)], (f"ask how much would be refunded if you cancelled order "
                         f"{o.order_id} (do not cancel it yet)"), [str(total)], {"order_id": o.order_id}))
        elif family == "order_logistics_modification" and pending:
            o = rng.choice(pending)
            out.append(([order_read(o.order_id)], f"ask which address order {o.order_id} will be shipped to",
                        [o.address.address1], {"order_id": o.order_id}))
        elif family == "return_delivered_order" and delivered:
            o = rng.choice(delivered)
            item = rng.choice(o.items)
            out.append(([order_read(o.order_id)], (f"ask how much you would get back if you returned the "
                         f"{item.name} from order {o.order_id} (do not return it yet)"), [str(item.price)],
                         {"order_id": o.order_id}))
        elif family in ("order_item_modification", "exchange_delivered_order"):
            orders, verb = (pending, "modify") if family == "order_item_modification" else (delivered, "exchange")
            for o in rng.sample(orders, len(orders)):
                pairs = [(i, v) for i in o.items for v in other_variants(db, i)]
                if pairs:
                    item, v = rng.choice(pairs)
                    diff = price_difference(db, o, [item.item_id], [v.item_id])
                    out.append(([order_read(o.order_id), product_read(item.product_id)],
                                (f"ask what the price difference would be if you were to {verb} the {item.name} in "
                                f"order {o.order_id} for the one with {options_text(v.options)} (just asking)"),
                                [str(abs(diff))], {"order_id": o.order_id}))
                    break
        return out

    def _information(self, family, user_id, reads, rng, exact) -> Plan | None:
        user = self.base.users[user_id]
        auth, known = self._identity(user_id, rng)
        questions = self._questions(family, user, rng)
        rng.shuffle(questions)
        for lookups, say, info, ids in questions:
            need = 1 + len(lookups)
            want = fit_reads(need, reads, exact)
            if want is None:
                continue
            fillers = self._fillers(user_id, {action_key(a) for a in [auth, *lookups]}, want - need, rng)
            if fillers is None:
                continue
            return Plan(user_id=user_id, actions=[auth, *fillers, *lookups], info=info, known_info=known, identity=identity_line(known),
                        intents=[{"say": say, "tool": None, "arguments": ids}],
                        fillers=[self._filler_say(f) for f in fillers])
        return None

    # ------------------------------------------------------------ refusal
    def _refusal(self, family, user_id, reads, rng, exact, focus=()) -> Plan | None:
        user = self.base.users[user_id]
        auth, known = self._identity(user_id, rng)
        builders = list(REFUSALS[family])
        rng.shuffle(builders)
        # a selected policy focus the family can break is honoured exactly: only its rules
        wanted = {code for code, _ in builders if RULE_FOCUS[code] in focus}
        builders = [(code, build) for code, build in builders if code in wanted or not wanted]
        for _, build in builders:
            ref = build(self.domain.episode(), user, rng)
            if ref is None or (reads == 0 and ref.lookups):
                continue
            required = [] if reads == 0 else [auth, *ref.lookups]
            want = fit_reads(len(required), reads, exact)
            if want is None:
                continue
            fillers = self._fillers(user_id, {action_key(a) for a in required}, want - len(required), rng)
            if fillers is None:
                continue
            actions = required[:1] + fillers + required[1:]
            # the agent must actually tell the user it cannot do this ("cannot" in its reply)
            return Plan(user_id=user_id, actions=actions, info=["cannot"], known_info=known, identity=identity_line(known),
                        intents=[{"say": ref.say, "tool": None, "arguments": ref.arguments,
                                  "refused_tool": ref.tool}],
                        refusal={"say": ref.say, "rule": ref.rule, "code": ref.code},
                        fillers=[self._filler_say(f) for f in fillers], initial_state=ref.initial_state)
        return None



def identity_line(known_info: str) -> str:
    """The plan's ``known_info`` (second person, for tau2's user scenario) as the user says it."""
    swaps = [("Your email is", "My email is"), ("You are", "I am"), ("your zip code", "my zip code"),
             ("You do not remember your email address.", "I do not remember my email address.")]
    for theirs, mine in swaps:
        known_info = known_info.replace(theirs, mine)
    return known_info


def sample_customers(db, rng: random.Random, k: int = 4) -> list[dict[str, Any]]:
    """A seeded sample of customers with their orders (for the LLM generator's prompt)."""
    out = []
    for uid in sample_up_to(rng, sorted(db.users), k):
        user = db.users[uid]
        orders = [{"order_id": oid, "status": o.status,
                   "items": [{"name": i.name, "item_id": i.item_id, "product_id": i.product_id, "price": i.price}
                             for i in o.items],
                   "paid_with": o.payment_history[0].payment_method_id if o.payment_history else None}
                  for oid, o in linked(db.orders, user.orders[:6])]
        out.append({"user_id": uid, "email": user.email,
                    "name": f"{user.name.first_name} {user.name.last_name}", "zip": user.address.zip,
                    "payment_methods": {pid: (p.source if p.source != "gift_card" else f"gift_card (balance {p.balance})")
                                        for pid, p in user.payment_methods.items()},
                    "orders": orders})
    return out
