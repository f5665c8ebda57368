"""Embedded telecom Generator: executable dual-control tasks over the real tau2 telecom DB.

The user holds one of the customer's lines on a simulated phone. A task's
``initial_state`` names that phone (``set_user_info``) and sets up what the
request needs, as tau2's official tasks do with ``initialization_actions``: a
broken device, a line suspended for an overdue bill, a used-up data allowance,
a trip abroad. Gold actions mix agent calls and device actions (requestor
"user") that the agent asks the user to perform. While planning, every gold
action is executed on a fresh episode of that initial state; a plan is kept
only if no call fails, every write changes the state, and a repaired phone
works again. Writes and reads follow ``num_write`` / ``num_read`` exactly when
those factors are selected (device actions count like agent calls), otherwise
the default prior.
"""
from __future__ import annotations

from typing import Any

from evosyn.agents.plans import (
    DEFAULT_PRIOR,
    DefaultPrior,
    Plan,
    action_key,
    fit_reads,
    sample_new,
    targets,
    weighted_order,
)
from evosyn.domains.telecom.assertions import final_state_assertions, reward_basis
from evosyn.domains.telecom.device import device_works, init
from evosyn.domains.telecom.ops import (
    Ctx,
    Op,
    bill_info,
    customer_info,
    device_info,
    filler_say,
    line_info,
    plan_info,
    propose,
)
from evosyn.domains.telecom.policy import state_rules
from evosyn.domains.telecom.refusals import refusal
from evosyn.storage.records import ToolCall

PRIMARY_OPS = {"plan_change": ["refuel"], "billing_issue": ["pay", "pay_later"], "device_upgrade": ["setup"],
               "line_management": ["resume", "suspend", "roaming_on"], "service_troubleshooting": ["fault"],
               "account_profile_update": ["roaming_off", "roaming_on"]}
SECONDARY_OPS = {"roaming_on": 3.0, "roaming_off": 3.0, "refuel": 2.0, "resume": 2.0, "fault": 2.0, "pay": 1.0, "pay_later": 0.5,
                 "suspend": 1.0, "setup": 1.0}
INFO_OPS = {"plan_change": plan_info, "account_profile_update": customer_info, "device_upgrade": device_info,
            "billing_issue": bill_info, "line_management": line_info}


def _initial_state(actions: list[dict]) -> Any:
    from tau2.data_model.tasks import InitialState

    return InitialState.model_validate({"initialization_actions": actions})


def _requestor(action: tuple) -> str:
    return action[2] if len(action) > 2 else "assistant"


class TelecomGenerator:
    def __init__(self, domain, prior: DefaultPrior = DEFAULT_PRIOR, tries: int = 24):
        self.domain = domain
        self.prior = prior
        self.tries = tries
        db = domain.episode().env.tools.db
        # the phone a user can hold: any line of a customer (its number finds the customer)
        self.holders = sorted((c.customer_id, lid) for c in db.customers for lid in c.line_ids)

    def kind(self, action: tuple) -> str | None:
        return self.domain.tool_kind(action[0], _requestor(action))

    def plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan:
        t = targets(sel, blueprint_id, seed, self.prior)
        rng = t.rng
        for _ in range(self.tries):
            customer_id, held = rng.choice(self.holders)
            want = t.reads_for_try()
            if t.outcome == "refuse":
                plan = refusal(self, t.family, customer_id, held, want, rng, exact=t.exact)
            else:
                plan = self._fulfilment(t.family, customer_id, held, t.writes, want, rng, exact=t.exact)
            if plan is not None:
                return plan
        raise t.exhausted("line", self.tries)

    # ------------------------------------------------------------ episodes
    def base_init(self, customer_id: str, held: str) -> list[dict]:
        db = self.domain.episode().env.tools.db
        c = next(c for c in db.customers if c.customer_id == customer_id)
        phone = next(x.phone_number for x in db.lines if x.line_id == held)
        return [init("set_user_info", name=c.full_name, phone_number=phone)]

    def run(self, inits: list[dict], actions: list[tuple]) -> Any | None:
        """A fresh episode of ``inits`` after ``actions``, or None when a call fails, a write changes nothing
        or an agent write breaks a policy rule (``policy.state_rules``)."""
        try:
            episode = self.domain.episode(_initial_state(inits))
        except (ValueError, AssertionError):  # an initialization action the state does not allow
            return None
        for action in actions:
            write = self.kind(action) == "write"
            if write and _requestor(action) == "assistant":
                with episode.reading():  # the rules only read the state
                    forbidden = state_rules(episode.env.tools.db, ToolCall(id="plan", name=action[0],
                                                                           arguments=action[1]))
                if forbidden:
                    return None  # the policy forbids this write in this state (e.g. a later op's setup made it so)
            before = episode.state_digest() if write else ""
            obs = episode.step(action[0], action[1], _requestor(action))
            if obs.error or (write and episode.state_digest() == before):
                return None
        return episode

    # ------------------------------------------------------------ fulfilment
    def _fulfilment(self, family, customer_id, held, writes, reads, rng, exact) -> Plan | None:
        inits = self.base_init(customer_id, held)
        if writes == 0:
            make = INFO_OPS.get(family)
            if make is None:
                return None
            episode = self.run(inits, [])
            op = make(Ctx(episode, customer_id, held, rng, 0)) if episode else None
            return self._assemble(customer_id, held, inits, [op], reads, rng, exact) if op else None
        ops: list[Op] = []
        used: set[str] = set()
        done = 0
        while done < writes:
            episode = self.run(inits, [a for op in ops for a in op.steps])
            if episode is None:
                return None
            pool = list(PRIMARY_OPS[family]) if not ops else weighted_order(rng, SECONDARY_OPS)
            if not ops:
                rng.shuffle(pool)
            chosen = None
            for kind in pool:
                ctx = Ctx(episode, customer_id, held, rng, writes - done, set(used))
                op = propose(kind, ctx)
                if op is None:
                    continue
                n = sum(self.kind(a) == "write" for a in op.steps)
                if n == 0 or n > writes - done or self.run(inits + op.init, [a for o in ops + [op] for a in o.steps]) is None:
                    continue
                chosen, used = op, ctx.used
                break
            if chosen is None:
                return None
            ops.append(chosen)
            inits = inits + chosen.init
            done += sum(self.kind(a) == "write" for a in chosen.steps)
        return self._assemble(customer_id, held, inits, ops, reads, rng, exact)

    def _assemble(self, customer_id, held, inits, ops: list[Op], reads: int, rng, exact) -> Plan | None:
        actions: list[tuple] = [("get_customer_by_phone", {"phone_number": self._phone(held)})]
        for op in ops:
            actions.extend(op.steps)
        filled = self.filled(customer_id, held, inits, _dedupe_reads(actions, self.kind), reads, rng, exact)
        if filled is None:
            return None
        actions, fillers, episode = filled
        device_ops = [op for op in ops if op.kind in ("fault", "setup")]
        if device_ops and not device_works(episode, mms=any(a[0] == "can_send_mms" for op in device_ops
                                                            for a in op.steps)):
            return None
        db = episode.env.tools.db
        c = next(c for c in db.customers if c.customer_id == customer_id)
        known = f"You are {c.full_name} with phone number {self._phone(held)}."
        if any(op.abroad for op in ops):
            known += " You are currently abroad."
        intents = [self._intent(op) for op in ops]
        return self.scored(Plan(user_id=self._phone(held), actions=actions, intents=intents,
                                info=[i for op in ops for i in op.info], fillers=[filler_say(f) for f in fillers],
                                known_info=known, initial_state={"initialization_actions": inits}),
                           customer_id, episode)

    def filled(self, customer_id, held, inits, actions: list[tuple], reads: int, rng,
               exact) -> tuple[list[tuple], list[tuple], Any] | None:
        """(actions with side lookups right after the identification up to the read target, the side lookups,
        the episode after them), or None when the target is too small, no such lookups exist or a call fails."""
        have = sum(self.kind(a) == "read" for a in actions)
        reads = fit_reads(have, reads, exact)
        if reads is None:
            return None
        if not actions:  # a categorical refusal without lookups: no identification to put lookups after
            fillers = [] if reads == have else None
        else:
            fillers = self._fillers(customer_id, held, actions, inits, reads - have, rng)
        if fillers is None:
            return None
        actions = actions[:1] + fillers + actions[1:]
        episode = self.run(inits, actions)
        return None if episode is None else (actions, fillers, episode)

    def scored(self, plan: Plan, customer_id: str, episode) -> Plan:
        """The plan with its env assertions and reward basis (see ``assertions.py``)."""
        initial = _initial_state(plan.initial_state["initialization_actions"])
        plan.assertions = final_state_assertions(episode, customer_id)
        plan.reward_basis = reward_basis(self.domain, initial, plan.actions, episode, plan.info)
        return plan

    def _intent(self, op: Op) -> dict:
        """The user's request: the call it names (whose ids a confirmation must mention) and, when the request
        takes further writes after it, the last of them (when the user may bring up the next request)."""
        out = {"say": op.say, "tool": op.intent[0] if op.intent else None,
               "arguments": op.intent[1] if op.intent else {}}
        last = next((a for a in reversed(op.steps) if self.kind(a) == "write"), None)
        if last is not None and op.intent and (last[0], last[1]) != tuple(op.intent):
            out["ends_with"] = {"tool": last[0], "arguments": last[1]}
        return out

    def _phone(self, line_id: str) -> str:
        db = self.domain.episode().env.tools.db
        return next(x.phone_number for x in db.lines if x.line_id == line_id)

    def _fillers(self, customer_id, held, actions, inits, n: int, rng) -> list[tuple] | None:
        """Side lookups the user asks for first: other lines, bills, data usage (agent reads)."""
        if n <= 0:
            return []
        episode = self.run(inits, [])
        if episode is None:
            return None
        db = episode.env.tools.db
        c = next(c for c in db.customers if c.customer_id == customer_id)
        pool = [("get_details_by_id", {"id": i}) for i in c.line_ids + c.bill_ids]
        pool += [("get_data_usage", {"customer_id": customer_id, "line_id": i}) for i in c.line_ids]
        pool.append(("get_bills_for_customer", {"customer_id": customer_id}))
        return sample_new(rng, pool, {action_key(a) for a in actions}, n)


def _dedupe_reads(actions: list[tuple], kind) -> list[tuple]:
    """Drop a read that repeats one made since the last write (the state cannot have changed)."""
    out, seen = [], set()
    for a in actions:
        k = kind(a)
        if k == "write":
            seen = set()
        elif k == "read":
            key = (action_key(a), len(a) > 2)
            if key in seen:
                continue
            seen.add(key)
        out.append(a)
    return out
