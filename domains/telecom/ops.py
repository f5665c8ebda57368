"""Requests the embedded telecom generator composes, found in the live episode state.

An ``Op`` is one user request: its gold steps in order (agent reads and writes,
and device actions with requestor "user"), the initialization actions it needs
(a suspended line, an overdue bill, a broken phone), what the user says and what
the agent must tell. Each op follows the telecom policy (main_policy.md and the
tech-support manual): a payment request only for an overdue bill, then the user
pays on the device and the agent checks the bill; a line resumed only when no
bill is overdue and the contract has not ended, then the phone rebooted; a line
suspended only for an overdue bill or an ended contract; at most 2 GB refuelled;
roaming enabled for a traveller at no cost; device faults fixed by the user on
the phone, step by step, as the agent guides.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from evosyn.domains.telecom.device import FAULTS, USER, compatible, init
from evosyn.domains.telecom.policy import MAX_REFUEL_GB, TODAY  # noqa: F401 (MAX_REFUEL_GB: refusals use it)

REFUEL_GB = (0.5, 1.0, 1.5, 2.0)


@dataclass
class Op:
    kind: str
    steps: list[tuple]
    say: str
    info: list[str] = field(default_factory=list)
    init: list[dict[str, Any]] = field(default_factory=list)
    intent: tuple | None = None  # the (tool, arguments) the user's request names
    abroad: bool = False


@dataclass
class Ctx:
    """What an op proposal sees: the live episode, the customer and the line whose phone the user holds."""

    episode: Any
    customer_id: str
    held_line: str
    rng: random.Random
    budget: int  # writes still wanted
    used: set[str] = field(default_factory=set)  # lines (and bills) earlier ops act on

    @property
    def db(self):
        return self.episode.env.tools.db

    def customer(self):
        return next(c for c in self.db.customers if c.customer_id == self.customer_id)

    def line(self, line_id: str):
        return next(x for x in self.db.lines if x.line_id == line_id)

    def bills(self):
        ids = set(self.customer().bill_ids)
        return [b for b in self.db.bills if b.bill_id in ids]

    def plan(self, plan_id: str):
        return next(p for p in self.db.plans if p.plan_id == plan_id)

    def lines(self, status: str | None = None, free: bool = True):
        out = [self.line(x) for x in self.customer().line_ids]
        out = [x for x in out if (status is None or x.status.value == status) and not (free and x.line_id in self.used)]
        self.rng.shuffle(out)
        return out


def _status(bill) -> str:
    return bill.status.value


def _details(i: str) -> tuple:
    return ("get_details_by_id", {"id": i})


def has_draft_bill(ctx: Ctx) -> bool:
    # a refuel charge lands on the draft bill; without one tau2 creates a bill with a random id,
    # and the final state would not be reproducible
    return any(_status(b) == "Draft" for b in ctx.bills())


def owes(ctx: Ctx) -> bool:
    return any(_status(b) in ("Overdue", "Awaiting Payment") for b in ctx.bills())


def _new_bill_id(ctx: Ctx) -> str:
    return f"B{ctx.rng.randint(2_000_000, 9_999_999)}"


# ------------------------------------------------------------------ agent-side requests
def refuel(ctx: Ctx) -> Op | None:
    if ctx.budget < 1 or not has_draft_bill(ctx):
        return None
    for line in ctx.lines("Active"):
        plan = ctx.plan(line.plan_id)
        gb = ctx.rng.choice(REFUEL_GB)
        args = {"customer_id": ctx.customer_id, "line_id": line.line_id, "gb_amount": gb}
        charge = gb * plan.data_refueling_price_per_gb
        return Op("refuel", [_details(line.line_id), _details(plan.plan_id), ("refuel_data", args)],
                  f"add {gb} GB of data to the line with phone number {line.phone_number}",
                  info=[f"{charge:.2f}"], intent=("refuel_data", args))
    return None


def plan_info(ctx: Ctx) -> Op | None:
    line = ctx.line(ctx.held_line)
    other = ctx.rng.choice([p for p in ctx.db.plans if p.plan_id != line.plan_id])
    return Op("plan_info", [_details(line.line_id), _details(other.plan_id)],
              f"know the monthly price and data limit of the {other.name} before switching from my current plan",
              info=[f"{other.price_per_month}"])


def pay(ctx: Ctx, later: bool = False) -> Op | None:
    """The overdue-bill flow; ``later``: the user only wants the request and will pay on the phone later."""
    if ctx.budget < (1 if later else 2) or any(_status(b) == "Awaiting Payment" for b in ctx.bills()):
        return None
    overdue = [b for b in ctx.bills() if _status(b) == "Overdue" and b.bill_id not in ctx.used]
    extra: list[dict] = []
    if not overdue:
        active = [x for x in ctx.lines("Active") if x.line_id != ctx.held_line]
        if not active or owes(ctx):
            return None
        bill_id = _new_bill_id(ctx)
        extra = [init("suspend_line_for_overdue_bill", "assistant", customer_id=ctx.customer_id,
                      line_id=active[0].line_id, new_bill_id=bill_id, contract_ended=False),
                 init("simulate_network_search")]
        amount = ctx.plan(active[0].plan_id).price_per_month
    else:
        bill_id, amount = overdue[0].bill_id, overdue[0].total_due
    args = {"customer_id": ctx.customer_id, "bill_id": bill_id}
    ctx.used.add(bill_id)
    steps = [("get_bills_for_customer", {"customer_id": ctx.customer_id}), ("send_payment_request", args)]
    if later:
        return Op("pay_later", steps, "get a payment request for my overdue bill; I will pay it from my phone later",
                  info=[f"{amount:.2f}"], init=extra, intent=("send_payment_request", args))
    steps += [("check_payment_request", {}, USER), ("make_payment", {}, USER), _details(bill_id)]
    return Op("pay", steps, "pay my overdue bill", info=[f"{amount:.2f}"], init=extra,
              intent=("send_payment_request", args))


def resume(ctx: Ctx) -> Op | None:
    if ctx.budget < 1 or owes(ctx):
        return None
    extra: list[dict] = []
    suspended = [x for x in ctx.lines("Suspended") if x.contract_end_date >= TODAY]
    if not suspended:
        active = [x for x in ctx.lines("Active") if x.line_id != ctx.held_line]
        if not active:
            return None
        line = active[0]
        extra = [init("suspend_line", "assistant", customer_id=ctx.customer_id, line_id=line.line_id,
                      reason="customer request")]
    else:
        line = suspended[0]
    if line.line_id == ctx.held_line and ctx.budget < 2:
        return None
    args = {"customer_id": ctx.customer_id, "line_id": line.line_id}
    steps = [_details(line.line_id), ("get_bills_for_customer", {"customer_id": ctx.customer_id}),
             ("resume_line", args)]
    if line.line_id == ctx.held_line:  # the policy: after a resume the user reboots the phone
        steps.append(("reboot_device", {}, USER))
    ctx.used.add(line.line_id)
    return Op("resume", steps, f"lift the suspension on the line with phone number {line.phone_number}",
              init=extra, intent=("resume_line", args))


def suspend(ctx: Ctx) -> Op | None:
    # main_policy.md: a line can be suspended only for an overdue bill or an ended contract
    if ctx.budget < 1 or not any(_status(b) == "Overdue" for b in ctx.bills()):
        return None
    for line in ctx.lines("Active"):
        if line.line_id == ctx.held_line:
            continue
        args = {"customer_id": ctx.customer_id, "line_id": line.line_id, "reason": "overdue bill"}
        ctx.used.add(line.line_id)
        return Op("suspend", [("get_bills_for_customer", {"customer_id": ctx.customer_id}), _details(line.line_id),
                              ("suspend_line", args)],
                  f"suspend the line with phone number {line.phone_number} until the overdue bill is settled",
                  intent=("suspend_line", args))
    return None


def roaming(ctx: Ctx, enable: bool) -> Op | None:
    if ctx.budget < 1:
        return None
    for line in ctx.lines():
        if line.roaming_enabled == enable or (line.line_id == ctx.held_line and not enable):
            continue
        tool = "enable_roaming" if enable else "disable_roaming"
        args = {"customer_id": ctx.customer_id, "line_id": line.line_id}
        ctx.used.add(line.line_id)
        say = (f"have roaming turned on for the line with phone number {line.phone_number}, which travels abroad "
               f"next week" if enable else f"turn off roaming on the line with phone number {line.phone_number}")
        return Op("roaming_on" if enable else "roaming_off", [_details(line.line_id), (tool, args)], say,
                  intent=(tool, args))
    return None


def customer_info(ctx: Ctx) -> Op | None:
    c = ctx.customer()
    return Op("account_info", [], "know which email address is on file for my account", info=[c.email])


def bill_info(ctx: Ctx) -> Op | None:
    bills = sorted(ctx.bills(), key=lambda b: b.issue_date)
    if not bills:
        return None
    latest = bills[-1]
    return Op("bill_info", [("get_bills_for_customer", {"customer_id": ctx.customer_id})],
              "know the total amount due on my most recent bill", info=[f"{latest.total_due}"])


def line_info(ctx: Ctx) -> Op | None:
    line = ctx.rng.choice(ctx.lines(free=False))
    return Op("line_info", [_details(line.line_id)],
              f"know when the contract of the line with phone number {line.phone_number} ends",
              info=[line.contract_end_date.isoformat()])


def device_info(ctx: Ctx) -> Op | None:
    line = ctx.line(ctx.held_line)
    if not line.device_id:
        return None
    device = next(d for d in ctx.db.devices if d.device_id == line.device_id)
    return Op("device_info", [_details(line.line_id), _details(device.device_id)],
              "know which device model is registered on my line before I upgrade it", info=[device.model])


# ------------------------------------------------------------------ the phone the user holds
def fault(ctx: Ctx, setup: bool = False) -> Op | None:
    """One to three device faults on the held phone whose fixes fit the write budget exactly."""
    if ctx.line(ctx.held_line).status.value != "Active" or ctx.held_line in ctx.used or ctx.budget < 1:
        return None
    pool = [f for f in FAULTS.values() if f.setup or not setup]
    extras = [] if setup else ["roaming_abroad", "data_exceeded"]
    names: list[str] = []
    writes = 0
    order = ctx.rng.sample([f.name for f in pool] + extras, len(pool) + len(extras))
    for name in order:
        cost = _agent_fault_cost(ctx, name) if name in extras else len(FAULTS[name].fix)
        if cost is None or writes + cost > ctx.budget or not compatible([n for n in names + [name] if n in FAULTS]):
            continue
        names.append(name)
        writes += cost
        if writes == ctx.budget or len(names) == 3 or (writes and ctx.rng.random() < 0.35):
            break
    if not names:
        return None
    ctx.used.add(ctx.held_line)
    return _fault_op(ctx, names, setup)


def _agent_fault_cost(ctx: Ctx, name: str) -> int | None:
    if name == "roaming_abroad":
        return 2  # the line's roaming (agent) and the phone's data roaming (user)
    if name == "data_exceeded":
        return 1 if has_draft_bill(ctx) else None
    return None


def _fault_op(ctx: Ctx, names: list[str], setup: bool) -> Op:
    line = ctx.line(ctx.held_line)
    line_args = {"customer_id": ctx.customer_id, "line_id": line.line_id}
    steps: list[tuple] = []
    extra: list[dict] = []
    symptoms: list[str] = []
    info: list[str] = []
    intent = None
    abroad, mms = False, False
    for name in names:
        if name == "roaming_abroad":
            abroad = True
            extra += [init("set_user_location", abroad=True), init("turn_roaming_off")]
            if line.roaming_enabled:
                extra.append(init("disable_roaming", "assistant", **line_args))
            steps += [_details(line.line_id), ("enable_roaming", line_args), ("check_network_status", {}, USER),
                      ("toggle_roaming", {}, USER)]
            symptoms.append("my mobile data stopped working now that I am abroad")
            intent = ("enable_roaming", line_args)
        elif name == "data_exceeded":
            plan = ctx.plan(line.plan_id)
            over = round(ctx.rng.choice((0.2, 0.4, 0.5)), 1)
            extra.append(init("set_data_usage", "assistant", data_used_gb=plan.data_limit_gb + over, **line_args))
            gb = ctx.rng.choice([g for g in REFUEL_GB if g > over])
            args = {**line_args, "gb_amount": gb}
            steps += [("get_data_usage", line_args), _details(plan.plan_id), ("refuel_data", args)]
            symptoms.append(f"my data ran out (I am willing to refuel {gb} GB)")
            info.append(f"{gb * plan.data_refueling_price_per_gb:.2f}")
            intent = intent or ("refuel_data", args)
        else:
            f = FAULTS[name]
            extra += f.breaks
            steps += f.diagnose + f.fix
            symptoms.append(f.symptom)
            mms = mms or f.mms
    steps.append(("can_send_mms", {}, USER) if mms else ("run_speed_test", {}, USER))
    if setup:
        say = f"set up the new phone I use with line {line.phone_number}: " + "; ".join(symptoms)
    else:
        say = "fix my phone: " + "; ".join(symptoms)
    last_write = intent or next(s for s in reversed(steps) if s[0] not in ("can_send_mms", "run_speed_test"))
    return Op("setup" if setup else "fault", steps, say, info=info, init=extra, intent=last_write[:2],
              abroad=abroad)


def propose(kind: str, ctx: Ctx) -> Op | None:
    if kind == "refuel":
        return refuel(ctx)
    if kind in ("pay", "pay_later"):
        return pay(ctx, later=kind == "pay_later")
    if kind == "resume":
        return resume(ctx)
    if kind == "suspend":
        return suspend(ctx)
    if kind in ("roaming_on", "roaming_off"):
        return roaming(ctx, kind == "roaming_on")
    if kind in ("fault", "setup"):
        return fault(ctx, setup=kind == "setup")
    raise ValueError(f"unknown telecom op {kind!r}")


def filler_say(action: tuple) -> str:
    """How the user asks for a side lookup (a filler read)."""
    name, args = action[0], action[1]
    if name == "get_data_usage":
        return f"tell me the data usage of line {args['line_id']}"
    if name == "get_bills_for_customer":
        return "list my bills"
    return f"check the details of {args['id']}"
