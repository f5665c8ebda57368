"""The retail policy rules: official gold trajectories pass (or are waived), broken calls are flagged."""
import pytest

from evosyn.domains.retail.policy import OFFICIAL_WAIVERS, check_write
from evosyn.envs.gold import AFFIRMATIVE, confirmation_request, gold_messages
from evosyn.envs.policies import rule_code
from evosyn.envs.replay import replay
from evosyn.envs.tau2.cow import peek
from evosyn.storage.records import Message, ToolCall


def official_violations(domain):
    out = {}
    for task in domain.tasks("base"):
        if not task.gold_actions:
            continue
        found = []

        def before(episode, call, history, found=found):
            if domain.tool_kind(call.name, call.requestor) == "write":
                found.extend(check_write(episode, call, history))

        replay(domain, task.initial_state, gold_messages(domain, task), before_call=before)
        out[task.id] = found
    return out


def test_official_gold_trajectories_pass_or_are_waived_with_a_reason(retail_env):
    found = official_violations(retail_env)
    assert len(found) == 112
    clean = [tid for tid, v in found.items() if not v]
    assert len(clean) >= 59  # measured: 59 of 112 pass with no waiver at all
    left = {tid: [v for v in vs if rule_code(v) not in OFFICIAL_WAIVERS.get(tid, {})] for tid, vs in found.items()}
    assert not {tid: v for tid, v in left.items() if v}
    for tid, rules in OFFICIAL_WAIVERS.items():  # no stale waiver: each waived rule really fires there
        assert set(rules) <= {rule_code(v) for v in found[tid]}, tid
        assert all(reason.strip() for reason in rules.values())


# ------------------------------------------------------------------ deliberately broken calls
def history(user, order_ids, call, confirm=True, auth=True):
    msgs = [Message(role="user", content="hello", requestor="user")]
    lookups = ([("find_user_id_by_email", {"email": user.email}, user.user_id)] if auth else [])
    lookups += [("get_order_details", {"order_id": o}, "{}") for o in order_ids]
    for n, (name, args, result) in enumerate(lookups):
        msgs.append(Message(role="assistant", tool_calls=[ToolCall(id=f"l{n}", name=name, arguments=args)]))
        msgs.append(Message(role="tool", content=result, tool_call_id=f"l{n}"))
    if confirm:
        msgs.append(Message(role="assistant", content=confirmation_request(call.name, call.arguments)))
        msgs.append(Message(role="user", content=AFFIRMATIVE, requestor="user"))
    msgs.append(Message(role="assistant", tool_calls=[call]))
    return msgs


@pytest.fixture(scope="module")
def db(retail_env):
    return retail_env.cow.base


def first_order(db, status, where=lambda o, u: True):
    for o in sorted(db.orders.values(), key=lambda o: o.order_id):
        if o.status == status and where(o, db.users[o.user_id]):
            return o, db.users[o.user_id]
    raise LookupError(status)


def codes(retail_env, call, user, orders, **kw):
    episode = retail_env.episode()
    return {rule_code(v) for v in check_write(episode, call, history(user, orders, call, **kw))}


def swap(db, order, available=True):
    for item in order.items:
        for v in db.products[item.product_id].variants.values():
            if v.item_id != item.item_id and v.available == available:
                return item, v
    return None


def test_a_correct_cancellation_passes_and_each_break_is_named(retail_env, db):
    order, user = first_order(db, "pending")
    ok = ToolCall(id="c", name="cancel_pending_order", arguments={"order_id": order.order_id, "reason": "no longer needed"})
    assert codes(retail_env, ok, user, [order.order_id]) == set()
    assert "confirmation" in codes(retail_env, ok, user, [order.order_id], confirm=False)
    assert "authentication" in codes(retail_env, ok, user, [order.order_id], auth=False)
    assert "status_check" in codes(retail_env, ok, user, [])
    bad = ToolCall(id="c", name="cancel_pending_order", arguments={"order_id": order.order_id, "reason": "too slow"})
    assert codes(retail_env, bad, user, [order.order_id]) == {"cancel_reason"}
    done, owner = first_order(db, "delivered")
    late = ToolCall(id="c", name="cancel_pending_order", arguments={"order_id": done.order_id, "reason": "no longer needed"})
    assert codes(retail_env, late, owner, [done.order_id]) == {"order_status"}
    assert "authentication" in codes(retail_env, late, user, [done.order_id])  # another user's order


def test_variant_rules(retail_env, db):
    order, user = first_order(db, "delivered", lambda o, u: swap(db, o) and swap(db, o, available=False))
    item, v = swap(db, order)
    pay = order.payment_history[0].payment_method_id
    args = {"order_id": order.order_id, "item_ids": [item.item_id], "new_item_ids": [v.item_id], "payment_method_id": pay}
    call = ToolCall(id="x", name="exchange_delivered_order_items", arguments=args)
    assert codes(retail_env, call, user, [order.order_id]) - {"payment_balance"} == set()
    other = next(p for p in db.products.values() if p.product_id != item.product_id)
    wrong = dict(args, new_item_ids=[next(iter(other.variants))])
    assert "variant_match" in codes(retail_env, call.model_copy(update={"arguments": wrong}), user, [order.order_id])
    _, gone = swap(db, order, available=False)
    out = dict(args, new_item_ids=[gone.item_id])
    assert "variant_match" in codes(retail_env, call.model_copy(update={"arguments": out}), user, [order.order_id])


def test_payment_rules(retail_env, db):
    def low_gift(o, u):
        return next((k for k, m in u.payment_methods.items() if m.source == "gift_card"
                     and m.balance < o.payment_history[0].amount and k != o.payment_history[0].payment_method_id), None)

    order, user = first_order(db, "pending", low_gift)
    gift = low_gift(order, user)
    call = ToolCall(id="p", name="modify_pending_order_payment", arguments={"order_id": order.order_id,
                                                                            "payment_method_id": gift})
    assert "payment_balance" in codes(retail_env, call, user, [order.order_id])
    same = {"order_id": order.order_id, "payment_method_id": order.payment_history[0].payment_method_id}
    assert "payment_method" in codes(retail_env, call.model_copy(update={"arguments": same}), user, [order.order_id])
    done, owner = first_order(db, "delivered", lambda o, u: any(
        m.source != "gift_card" and k != o.payment_history[0].payment_method_id for k, m in u.payment_methods.items()))
    other = next(k for k, m in owner.payment_methods.items()
                 if m.source != "gift_card" and k != done.payment_history[0].payment_method_id)
    ret = ToolCall(id="r", name="return_delivered_order_items", arguments={
        "order_id": done.order_id, "item_ids": [done.items[0].item_id], "payment_method_id": other})
    assert codes(retail_env, ret, owner, [done.order_id]) == {"payment_method"}


def test_second_item_modification_is_locked(retail_env, db):
    order, user = first_order(db, "pending", lambda o, u: swap(db, o))
    item, v = swap(db, order)
    args = {"order_id": order.order_id, "item_ids": [item.item_id], "new_item_ids": [v.item_id],
            "payment_method_id": order.payment_history[0].payment_method_id}
    episode = retail_env.episode()
    call = ToolCall(id="m", name="modify_pending_order_items", arguments=args)
    assert not episode.step(call.name, args).error
    changed = peek(episode.env.tools.db.orders, order.order_id)
    item2, v2 = swap(db, changed)
    again = ToolCall(id="m2", name="modify_pending_order_items", arguments=dict(
        args, item_ids=[item2.item_id], new_item_ids=[v2.item_id]))
    found = {rule_code(v) for v in check_write(episode, again, history(user, [order.order_id], again))}
    assert "once_per_order" in found
    addr = ToolCall(id="a", name="modify_pending_order_address", arguments={
        "order_id": order.order_id, **{k: getattr(user.address, k) for k in
                                      ("address1", "address2", "city", "state", "country", "zip")}})
    assert "order_status" in {rule_code(v) for v in check_write(episode, addr, history(user, [order.order_id], addr))}
