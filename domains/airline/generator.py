"""Embedded airline Generator: builds executable tau2 tasks from the real airline DB.

For a fulfilment it composes state-changing ops (``ops.py``) for one user
and executes them on a fresh episode while planning, so every gold action is
known to succeed and to change state; the number of writes and reads follows
the blueprint's ``num_write`` / ``num_read`` exactly when those factors are in
the space, and otherwise the documented default prior (``DEFAULT_PRIOR``),
which, like an LLM generator left alone, favours single-write tasks. For a
refusal it finds a user and reservation whose request breaks a named rule.
"""
from __future__ import annotations

from evosyn.agents.plans import (
    DEFAULT_PRIOR,
    DefaultPrior,
    Plan,
    action_key,
    fit_reads,
    ops_in_order,
    sample_new,
    targets,
    unique_actions,
    weighted_order,
)
from evosyn.domains.airline.ops import FREE_BAGS, Op, active_reservations, cancellable, propose
from evosyn.envs.base import Domain

PRIMARY_OPS = {"flight_booking": ["book"], "flight_change": ["change", "cabin"], "flight_cancellation": ["cancel"],
               "refund_or_compensation": ["certificate"], "seat_or_baggage_service": ["bags", "passengers"],
               "loyalty_or_membership_service": ["bags"]}
# follow-up requests in multi-write tasks, weighted toward the short, single-entity ones
SECONDARY_OPS = {"cancel": 4.0, "cabin": 3.0, "certificate": 2.0, "bags": 2.0, "passengers": 1.0, "change": 1.0,
                 "book": 1.0}


class AirlineGenerator:
    def __init__(self, domain: Domain, prior: DefaultPrior = DEFAULT_PRIOR, user_tries: int = 40):
        self.domain = domain
        self.prior = prior
        self.user_tries = user_tries
        self.user_ids = sorted(domain.cow.base.users)  # type: ignore[attr-defined]

    def plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan:
        t = targets(sel, blueprint_id, seed, self.prior)
        rng, family = t.rng, t.family
        for user_id in rng.sample(self.user_ids, self.user_tries):
            want_reads = t.reads_for_try()
            plan = (self._refusal(family, user_id, want_reads, rng, exact=t.exact) if t.outcome == "refuse"
                    else self._fulfilment(family, user_id, t.writes, want_reads, rng, exact=t.exact))
            if plan is not None:
                return plan
        raise t.exhausted("user", self.user_tries)

    # ------------------------------------------------------------ fulfilment
    def _fulfilment(self, family, user_id, writes, reads, rng, exact) -> Plan | None:
        episode = self.domain.episode()
        ops: list[Op] = []
        if writes == 0:
            return self._information(family, user_id, reads, rng, exact)
        kinds = list(PRIMARY_OPS[family])
        rng.shuffle(kinds)
        touched: set[str] = set()
        for n in range(writes):
            pool = kinds if n == 0 else weighted_order(rng, SECONDARY_OPS)
            op = None
            for kind in pool:
                if kind == "book" and sum(o.kind == "book" for o in ops) >= 3:
                    continue
                # with a small read budget, keep later ops on reservations already looked up
                exclude = set() if (reads >= writes + 1 or not touched) else {
                    r for r in self.domain.cow.base.users[user_id].reservations if r not in touched}
                with episode.reading():  # proposing only reads the episode's state
                    op = propose(kind, episode, user_id, rng, exclude)
                if op is None:
                    continue
                obs = episode.step(op.tool, op.arguments)
                if obs.error:
                    op = None
                    continue
                break
            if op is None:
                return None
            ops.append(op)
            if op.reservation_id:
                touched.add(op.reservation_id)
        return self._assemble(user_id, ops, reads, rng, exact)

    def _assemble(self, user_id, ops: list[Op], reads: int, rng, exact) -> Plan | None:
        fillers = self._fillers_for(user_id, unique_actions(read for op in ops for read in op.reads), reads, rng,
                                    exact)
        if fillers is None:
            return None
        steps, intents = ops_in_order(ops)
        return Plan(user_id=user_id, actions=fillers + steps, intents=intents, info=[i for op in ops for i in op.info],
                    fillers=[self._filler_say(f) for f in fillers])

    def _fillers_for(self, user_id, required: list[tuple[str, dict]], reads: int, rng,
                     exact) -> list[tuple[str, dict]] | None:
        """Side lookups that bring ``required`` up to the read target; None when the target is too small for
        ``required`` or the user has too few other lookups."""
        reads = fit_reads(len(required), reads, exact)
        if reads is None:
            return None
        return self._fillers(user_id, {action_key(r) for r in required}, reads - len(required), rng)

    def _fillers(self, user_id, seen: set[str], n: int, rng) -> list[tuple[str, dict]] | None:
        if n <= 0:
            return []
        db = self.domain.cow.base  # type: ignore[attr-defined]
        user = db.users[user_id]
        pool: list[tuple[str, dict]] = [("get_user_details", {"user_id": user_id})]
        pool += [("get_reservation_details", {"reservation_id": r}) for r in user.reservations]
        for r in user.reservations[:4]:
            res = db.reservations.get(r)
            pool += [("get_flight_status", {"flight_number": f.flight_number, "date": f.date})
                     for f in (res.flights if res else [])]
        return sample_new(rng, pool, seen, n)

    @staticmethod
    def _filler_say(action: tuple[str, dict]) -> str:
        name, args = action
        if name == "get_user_details":
            return "read out what is on my profile"
        if name == "get_reservation_details":
            return f"check the details of reservation {args['reservation_id']}"
        return f"check the status of flight {args['flight_number']} on {args['date']}"

    def _information(self, family, user_id, reads, rng, exact) -> Plan | None:
        db = self.domain.cow.base  # type: ignore[attr-defined]
        user = db.users[user_id]
        candidates = active_reservations(db, user)
        if not candidates or reads < 1:
            return None
        if reads == 1:  # a one-lookup question: the status of one of the user's flights
            seg = rng.choice(rng.choice(candidates).flights)
            flight = db.flights[seg.flight_number].dates[seg.date]
            action = ("get_flight_status", {"flight_number": seg.flight_number, "date": seg.date})
            return Plan(user_id=user_id, actions=[action], info=[flight.status],
                        intents=[{"say": f"ask for the status of flight {seg.flight_number} on {seg.date}",
                                  "tool": None}])
        res = rng.choice(candidates)
        allowance = FREE_BAGS[user.membership][res.cabin] * len(res.passengers)
        required = [("get_user_details", {"user_id": user_id}),
                    ("get_reservation_details", {"reservation_id": res.reservation_id})]
        fillers = self._fillers_for(user_id, required, reads, rng, exact)
        if fillers is None:
            return None
        say = (f"ask how many checked bags in total travel free on reservation {res.reservation_id} "
               f"given your membership")
        return Plan(user_id=user_id, actions=fillers + required, intents=[{"say": say, "tool": None}],
                    info=[str(allowance)], fillers=[self._filler_say(f) for f in fillers])

    # ------------------------------------------------------------ refusal
    def _refusal(self, family, user_id, reads, rng, exact) -> Plan | None:
        db = self.domain.cow.base  # type: ignore[attr-defined]
        user = db.users[user_id]
        actives = active_reservations(db, user)
        rng.shuffle(actives)
        required: list[tuple[str, dict]] = []
        if family == "flight_cancellation":
            res = next((r for r in actives if not cancellable(db, r)), None)
            if res is None:
                return None
            say = f"cancel reservation {res.reservation_id} and get a refund"
            rule = ("it was booked more than 24 hours ago, is not business class, has no travel insurance "
                    "and no flight was cancelled by the airline, so it is not eligible for cancellation")
            required = [("get_reservation_details", {"reservation_id": res.reservation_id})]
        elif family == "flight_change":
            res = next((r for r in actives if r.cabin == "basic_economy"), None)
            if res is None:
                return None
            say = f"move reservation {res.reservation_id} to a later date"
            rule = "basic economy flights cannot be modified"
            required = [("get_reservation_details", {"reservation_id": res.reservation_id})]
        elif family == "refund_or_compensation":
            res = next((r for r in actives if r.cabin != "business" and r.insurance == "no"), None)
            if user.membership != "regular" or res is None:
                return None
            say = f"get compensation because you are unhappy with how reservation {res.reservation_id} went"
            rule = ("compensation is only for silver or gold members, insured or business travellers, and only "
                    "for cancelled or delayed flights")
            required = [("get_user_details", {"user_id": user_id}),
                        ("get_reservation_details", {"reservation_id": res.reservation_id})]
        elif family == "loyalty_or_membership_service":
            if user.membership == "gold":
                return None
            say = "have your bags on upcoming trips treated as gold member bags (you insist you are a gold member)"
            rule = f"the profile shows {user.membership} membership, so gold benefits do not apply"
            required = [("get_user_details", {"user_id": user_id})]
        elif family == "seat_or_baggage_service":
            res = next((r for r in actives if r.total_baggages > 0), None)
            if res is not None and rng.random() < 0.5 and reads > 0:
                say = f"remove one checked bag from reservation {res.reservation_id} and get money back"
                rule = "checked bags can be added but never removed"
                required = [("get_reservation_details", {"reservation_id": res.reservation_id})]
            else:
                say = "add a third traveller to one of your existing reservations"
                rule = "the number of passengers on a reservation can never change"
        else:  # flight_booking
            say = "book one flight for six people on one reservation"
            rule = "a reservation can hold at most five passengers"
        fillers = self._fillers_for(user_id, required, reads, rng, exact)
        if fillers is None:
            return None
        # the agent must actually tell the user it cannot do this ("cannot" in its reply)
        return Plan(user_id=user_id, actions=fillers + required, intents=[{"say": say, "tool": None}], info=["cannot"],
                    refusal={"say": say, "rule": rule}, fillers=[self._filler_say(f) for f in fillers])
