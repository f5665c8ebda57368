"""The library's embedded generator: a ``Plan`` (gold actions, the user's intents, what the agent must say)
for one blueprint, built from the real initial DB so every gold action is known to succeed.

The core does the rest: ``agents/generator.py`` turns the plan into a tau2 task, the embedded user simulator
plays its intents, the embedded teacher runs its gold actions, and the verifier replays the result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evosyn.agents.plans import (DEFAULT_PRIOR, DefaultPrior, Plan, Targets, action_key, fit_reads, ops_in_order,
                          sample_new, targets)

from .environment import MAX_LOANS


@dataclass
class Op:
    """One write the member asks for, with the lookups it needs first (``evosyn.agents.plans.RequestOp``)."""

    tool: str
    arguments: dict[str, Any]
    say: str
    reads: list[tuple[str, dict[str, Any]]]


class LibraryGenerator:
    def __init__(self, domain, prior: DefaultPrior = DEFAULT_PRIOR):
        self.domain, self.prior = domain, prior
        self.db = domain.episode().env.tools.db  # a fresh episode's DB is the initial state
        self.member_ids = sorted(self.db.members)

    def plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan:
        t = targets(sel, blueprint_id, seed, self.prior)  # raises Infeasible for a refusal asked to write
        foci = sel.get("policy_or_constraint_focus", [])
        for member_id in t.rng.sample(self.member_ids, len(self.member_ids)):
            reads = t.reads_for_try()
            plan = (self._refusal(t, member_id, foci, reads) if t.outcome == "refuse"
                    else self._fulfilment(t, member_id, reads))
            if plan is not None:
                return plan
        raise t.exhausted("member", len(self.member_ids))

    # ------------------------------------------------------------ fulfilment
    def _fulfilment(self, t: Targets, member_id: str, reads: int) -> Plan | None:
        member = self.db.members[member_id]
        who = ("get_member_details", {"member_id": member_id})
        if t.writes == 0:
            return None  # every request of this domain changes something
        if t.family == "borrow_book":
            if member.fines or len(member.loans) + t.writes > MAX_LOANS:
                return None
            free = sorted(b for b, book in self.db.books.items() if book.on_loan_to is None)
            ops = [Op("borrow_book", {"member_id": member_id, "book_id": b}, f"borrow book {b}",
                      [who, ("get_book_details", {"book_id": b})]) for b in t.rng.sample(free, t.writes)]
        else:  # return_book
            if len(member.loans) < t.writes:
                return None
            ops = [Op("return_book", {"member_id": member_id, "book_id": b}, f"return book {b}", [who])
                   for b in t.rng.sample(sorted(member.loans), t.writes)]
        required = list({action_key(r): r for op in ops for r in op.reads}.values())
        fillers = self._fillers(t, required, reads)
        if fillers is None:
            return None
        steps, intents = ops_in_order(ops)
        return Plan(user_id=member_id, actions=fillers + steps, intents=intents, info=[],
                    fillers=[f"check who holds book {a[1]['book_id']}" for a in fillers])

    # ------------------------------------------------------------ refusal
    def _refusal(self, t: Targets, member_id: str, foci: list[str], reads: int) -> Plan | None:
        member = self.db.members[member_id]
        if t.family == "borrow_book":
            free = sorted(b for b, book in self.db.books.items() if book.on_loan_to is None)
            say = f"borrow book {t.rng.choice(free)}"
            if "unpaid_fines" in foci and member.fines > 0:
                rule = "members with unpaid fines cannot borrow until the fines are paid"
            elif "loan_limit" in foci and len(member.loans) >= MAX_LOANS:
                rule = f"a member may hold at most {MAX_LOANS} books at once"
            else:
                return None
        else:  # return_book: a book somebody else holds
            others = sorted(b for b, book in self.db.books.items() if book.on_loan_to not in (None, member_id))
            if "ownership" not in foci or not others:
                return None
            say = f"return book {t.rng.choice(others)}"
            rule = "a member can only return a book they hold"
        required = [("get_member_details", {"member_id": member_id})]
        fillers = self._fillers(t, required, reads)
        if fillers is None:
            return None
        # the agent must tell the member it cannot do this ("cannot" in its reply)
        return Plan(user_id=member_id, actions=fillers + required, intents=[{"say": say, "tool": None}],
                    info=["cannot"], refusal={"say": say, "rule": rule},
                    fillers=[f"check who holds book {a[1]['book_id']}" for a in fillers])

    def _fillers(self, t: Targets, required: list[tuple[str, dict]], reads: int) -> list[tuple[str, dict]] | None:
        """Side lookups (a book's holder) that bring the required lookups up to the read target."""
        n = fit_reads(len(required), reads, t.exact)
        if n is None:
            return None
        pool = [("get_book_details", {"book_id": b}) for b in sorted(self.db.books)]
        return sample_new(t.rng, pool, {action_key(r) for r in required}, n - len(required))
