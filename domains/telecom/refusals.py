"""Requests the telecom policy forbids, one kind per task family, found in the live DB.

Each refusal names the rule it breaks (main_policy.md): a payment request only
for an overdue bill; no resuming a line while a bill is overdue or after its
contract ended; suspension only for an overdue bill or an ended contract; at most
2 GB of data refuelled; no subjective recommendations; only the caller's own
lines. The gold actions are the lookups that show the rule applies (none for a
categorical rule when the read budget is zero); nothing changes state.
"""
from __future__ import annotations

from evosyn.domains.telecom.device import init
from evosyn.domains.telecom.ops import MAX_REFUEL_GB, TODAY, Ctx, filler_say

RULES = {
    "refuel_limit": f"at most {MAX_REFUEL_GB:g} GB of data can be refuelled at a time",
    "not_overdue": "a payment request can only be sent for an overdue bill",
    "resume_overdue": "a suspension can only be lifted after all overdue bills are paid",
    "contract_ended": "a line whose contract end date is in the past cannot be resumed, even after payment",
    "suspend_reason": "a line can only be suspended for an overdue bill or an ended contract",
    "no_recommendation": "I can only give information from our systems, not subjective recommendations",
    "not_your_line": "I can only discuss and change lines on your own account",
}


def refusal(gen, family, customer_id, held, reads, rng, exact):
    """A refusal ``Plan`` or None (this customer cannot realize it)."""
    from evosyn.agents.plans import Plan

    inits = gen.base_init(customer_id, held)
    episode = gen.run(inits, [])
    if episode is None:
        return None
    ctx = Ctx(episode, customer_id, held, rng, 0)
    found = _find(family, ctx, rng)
    if found is None:
        return None
    say, rule, extra_init, required, categorical = found
    inits = inits + extra_init
    identify = ("get_customer_by_phone", {"phone_number": ctx.line(held).phone_number})
    actions = required if (categorical and reads == 0) else [identify] + required
    filled = gen.filled(customer_id, held, inits, actions, reads, rng, exact)
    if filled is None:
        return None
    actions, fillers, final = filled
    c = ctx.customer()
    return gen.scored(Plan(user_id=ctx.line(held).phone_number, actions=actions, intents=[{"say": say, "tool": None}],
                info=["cannot"], refusal={"say": say, "rule": RULES[rule], "code": rule},
                fillers=[filler_say(f) for f in fillers],
                known_info=f"You are {c.full_name} with phone number {ctx.line(held).phone_number}.",
                initial_state={"initialization_actions": inits}), customer_id, final)


def _find(family: str, ctx: Ctx, rng):
    """(say, rule code, extra init actions, required reads, categorical) or None."""
    cid = ctx.customer_id
    bills = ctx.bills()
    overdue = any(b.status.value == "Overdue" for b in bills)
    if family == "plan_change":
        lines = ctx.lines("Active")
        if not lines:
            return None
        gb = rng.choice((3.0, 4.0, 5.0))
        return (f"add {gb:g} GB of data to the line with phone number {lines[0].phone_number} in one go",
                "refuel_limit", [], [], True)
    if family == "billing_issue":
        candidates = [b for b in bills if b.status.value != "Overdue"]
        if not candidates:
            return None
        bill = rng.choice(candidates)
        return (f"get a payment request for bill {bill.bill_id} so you can pay it now", "not_overdue", [],
                [("get_details_by_id", {"id": bill.bill_id})], False)
    if family == "line_management":
        active = [x for x in ctx.lines("Active") if x.line_id != ctx.held_line]
        choice = rng.choice(["resume_overdue", "contract_ended", "suspend_reason"])
        if choice == "resume_overdue" and overdue and active:
            line = active[0]
            return ((f"lift the suspension on the line with phone number {line.phone_number} now; you will pay "
                     f"the overdue bill later"), "resume_overdue",
                    [init("suspend_line", "assistant", customer_id=cid, line_id=line.line_id, reason="request")],
                    [("get_details_by_id", {"id": line.line_id}), ("get_bills_for_customer", {"customer_id": cid})],
                    False)
        if choice == "contract_ended" and not overdue and active:
            line = active[0]
            bill_id = f"B{rng.randint(2_000_000, 9_999_999)}"
            return (f"lift the suspension on the line with phone number {line.phone_number}", "contract_ended",
                    [init("suspend_line_for_overdue_bill", "assistant", customer_id=cid, line_id=line.line_id,
                          new_bill_id=bill_id, contract_ended=True)],
                    [("get_details_by_id", {"id": line.line_id})], False)
        if choice == "suspend_reason" and not overdue and active:
            line = active[0]
            return (f"suspend the line with phone number {line.phone_number} while you travel for two months",
                    "suspend_reason", [], [("get_bills_for_customer", {"customer_id": cid}),
                                           ("get_details_by_id", {"id": line.line_id})], False)
        return None
    if family == "service_troubleshooting":
        held = ctx.line(ctx.held_line)
        if held.status.value != "Active" or overdue or held.contract_end_date < TODAY:
            return None
        bill_id = f"B{rng.randint(2_000_000, 9_999_999)}"
        return (("get your phone working again: it has had no service since yesterday, and you would pay any bill "
                 "to get your line back"), "contract_ended",
                [init("suspend_line_for_overdue_bill", "assistant", customer_id=cid, line_id=held.line_id,
                      new_bill_id=bill_id, contract_ended=True), init("simulate_network_search")],
                [("check_status_bar", {}, "user"), ("get_details_by_id", {"id": held.line_id})], False)
    if family == "device_upgrade":
        return ("hear which new phone model you should buy to replace your current one", "no_recommendation", [],
                [], True)
    if family == "account_profile_update":
        others = [x for x in ctx.db.lines if x.line_id not in ctx.customer().line_ids]
        if not others:
            return None
        line = rng.choice(others)
        return (f"turn off roaming on the line with phone number {line.phone_number}, which belongs to a friend",
                "not_your_line", [], [], False)
    return None
