"""The embedded generator: for one blueprint's selection, a ``Plan`` (the member, the gold actions in order, the
member's requests, what the agent must say, and for a refusal the rule it breaks), built from the initial state
so every gold action is known to succeed.

The core does the rest: it turns the plan into a task, the embedded user simulator plays the requests, the
embedded teacher runs the gold actions, and the verifier replays the result. Return ``None`` from a try (or
raise ``Infeasible``) when a selection cannot be realized: it is recorded as a rejection with its reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evosyn.agents.plans import (DEFAULT_PRIOR, DefaultPrior, Plan, Targets, action_key, fit_reads, ops_in_order,
                          sample_new, targets)

from .environment import MAX_BOOKINGS


@dataclass
class Op:
    """One write the member asks for, with the lookups it needs first (``evosyn.agents.plans.RequestOp``)."""

    tool: str
    arguments: dict[str, Any]
    say: str
    reads: list[tuple[str, dict[str, Any]]]


class Generator:
    def __init__(self, domain, prior: DefaultPrior = DEFAULT_PRIOR):
        self.state, self.prior = domain.initial, prior  # the initial state every task starts from
        self.member_ids = sorted(self.state.members)

    def plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan:
        t = targets(sel, blueprint_id, seed, self.prior)  # the seeded RNG and the write / read targets
        for member_id in t.rng.sample(self.member_ids, len(self.member_ids)):
            reads = t.reads_for_try()
            plan = self._refusal(t, member_id, reads) if t.outcome == "refuse" else self._fulfil(t, member_id, reads)
            if plan is not None:
                return plan
        raise t.exhausted("member", len(self.member_ids))

    def _fulfil(self, t: Targets, member_id: str, reads: int) -> Plan | None:
        member = self.state.members[member_id]
        who = ("get_member_details", {"member_id": member_id})
        if t.family == "book_class":
            open_ = sorted(c for c, k in self.state.classes.items()
                           if member_id not in k.attendees and len(k.attendees) < k.capacity)
            if t.writes == 0 or len(member.bookings) + t.writes > MAX_BOOKINGS or len(open_) < t.writes:
                return None
            ops = [Op("book_class", {"member_id": member_id, "class_id": c}, f"book a place in class {c}",
                      [who, ("get_class_details", {"class_id": c})]) for c in t.rng.sample(open_, t.writes)]
        else:  # cancel_booking
            if t.writes == 0 or len(member.bookings) < t.writes:
                return None
            ops = [Op("cancel_booking", {"member_id": member_id, "class_id": c}, f"cancel your booking of class {c}",
                      [who]) for c in t.rng.sample(sorted(member.bookings), t.writes)]
        required = list({action_key(r): r for op in ops for r in op.reads}.values())
        fillers = self._fillers(t, required, reads)
        if fillers is None:
            return None
        steps, intents = ops_in_order(ops)
        return Plan(user_id=member_id, actions=fillers + steps, intents=intents, info=[],
                    fillers=[f"check class {a[1]['class_id']}" for a in fillers])

    def _refusal(self, t: Targets, member_id: str, reads: int) -> Plan | None:
        member = self.state.members[member_id]
        if t.family != "book_class" or len(member.bookings) < MAX_BOOKINGS:
            return None  # the one rule: a booking above the limit
        open_ = sorted(c for c, k in self.state.classes.items() if member_id not in k.attendees)
        say = f"book a place in class {t.rng.choice(open_)}"
        required = [("get_member_details", {"member_id": member_id})]
        fillers = self._fillers(t, required, reads)
        if fillers is None:
            return None
        # the agent must tell the member it cannot do this ("cannot" in its reply)
        return Plan(user_id=member_id, actions=fillers + required, intents=[{"say": say, "tool": None}],
                    info=["cannot"], refusal={"say": say, "rule": f"a member may book at most {MAX_BOOKINGS} "
                                                                  "classes at once"},
                    fillers=[f"check class {a[1]['class_id']}" for a in fillers])

    def _fillers(self, t: Targets, required: list[tuple[str, dict]], reads: int) -> list[tuple[str, dict]] | None:
        """Side lookups (a class's details) that bring the required lookups up to the read target."""
        n = fit_reads(len(required), reads, t.exact)
        if n is None:
            return None
        pool = [("get_class_details", {"class_id": c}) for c in sorted(self.state.classes)]
        return sample_new(t.rng, pool, {action_key(r) for r in required}, n - len(required))
