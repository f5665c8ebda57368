"""State-changing operations the embedded airline generator composes, found in the real DB.

Each ``Op`` is one gold write plus the reads that justify it under the airline
policy (the reservation is looked up before it is modified; eligibility and
membership are read from the user before compensation or booking). Ops are
proposed from the live episode state, so a second op on the same reservation
sees the effect of the first.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from evosyn.domains.airline.policy import FLOWN, NOW

FREE_BAGS = {  # per passenger, by membership and cabin (policy.md, "Checked baggage")
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
FAMILY_OF_OP = {"cancel": "flight_cancellation", "bags": "seat_or_baggage_service",
                "passengers": "seat_or_baggage_service", "cabin": "flight_change", "change": "flight_change",
                "certificate": "refund_or_compensation", "book": "flight_booking"}


@dataclass
class Op:
    kind: str
    tool: str
    arguments: dict[str, Any]
    reads: list[tuple[str, dict[str, Any]]]
    say: str  # how the user asks for it
    info: list[str] = field(default_factory=list)  # what the agent must tell the user
    reservation_id: str | None = None


def _db(episode):
    return episode.env.tools.db


def _flown(db, res) -> bool:
    return any(db.flights[f.flight_number].dates[f.date].status in FLOWN for f in res.flights
               if f.flight_number in db.flights and f.date in db.flights[f.flight_number].dates)


def _segment_statuses(db, res) -> list[str]:
    out = []
    for f in res.flights:
        flight = db.flights.get(f.flight_number)
        out.append(flight.dates[f.date].status if flight and f.date in flight.dates else "unknown")
    return out


def cancellable(db, res) -> bool:
    created = datetime.fromisoformat(res.created_at)
    return (res.status is None and not _flown(db, res) and (
        NOW - created <= timedelta(hours=24) or res.cabin == "business" or res.insurance == "yes"
        or "cancelled" in _segment_statuses(db, res)))


def _seats(db, flight_number: str, date: str, cabin: str) -> int:
    """Free seats of a bookable segment; 0 for segments that are no longer open (on time, delayed, ...)."""
    status = db.flights[flight_number].dates.get(date) if flight_number in db.flights else None
    return status.available_seats[cabin] if status is not None and status.status == "available" else 0


def _card(user, need: int = 0) -> str | None:
    cards = sorted(k for k, m in user.payment_methods.items() if m.source == "credit_card")
    if cards:
        return cards[0]
    gifts = sorted(k for k, m in user.payment_methods.items() if m.source == "gift_card" and m.amount >= need)
    return gifts[0] if gifts else None


def _res_read(rid: str) -> tuple[str, dict]:
    return ("get_reservation_details", {"reservation_id": rid})


def active_reservations(db, user) -> list:
    out = []
    for rid in user.reservations:
        res = db.reservations.get(rid)
        if res is not None and res.status is None and not _flown(db, res):
            out.append(res)
    return out


def propose(kind: str, episode, user_id: str, rng: random.Random, exclude: set[str]) -> Op | None:
    """One feasible op of ``kind`` for this user in the current state, or None."""
    db = _db(episode)
    user = db.users[user_id]
    reservations = [r for r in active_reservations(db, user) if r.reservation_id not in exclude]
    rng.shuffle(reservations)
    if kind == "cancel":
        for res in reservations:
            if cancellable(db, res):
                rid = res.reservation_id
                return Op("cancel", "cancel_reservation", {"reservation_id": rid}, [_res_read(rid)],
                          f"cancel reservation {rid}", reservation_id=rid)
    elif kind == "bags":
        for res in reservations:
            add = rng.choice([1, 2])
            total = res.total_baggages + add
            free = FREE_BAGS[user.membership][res.cabin] * len(res.passengers)
            nonfree = max(res.nonfree_baggages, total - free)
            fee = 50 * (nonfree - res.nonfree_baggages)
            pay = _card(user, fee)
            if pay is None:
                continue
            rid = res.reservation_id
            # the free allowance depends on the membership: read the profile too
            return Op("bags", "update_reservation_baggages",
                      {"reservation_id": rid, "total_baggages": total, "nonfree_baggages": nonfree,
                       "payment_id": pay},
                      [("get_user_details", {"user_id": user_id}), _res_read(rid)], f"add {add} checked bag{'s' if add > 1 else ''} to reservation {rid} "
                      f"(pay with {pay})", info=[str(fee)] if fee else [], reservation_id=rid)
    elif kind == "passengers":
        for res in reservations:
            candidates = [p for p in user.saved_passengers
                          if (p.first_name, p.last_name) not in {(q.first_name, q.last_name) for q in res.passengers}]
            if not candidates:
                continue
            new = rng.choice(candidates)
            passengers = [p.model_dump() for p in res.passengers]
            passengers[0] = {"first_name": new.first_name, "last_name": new.last_name, "dob": new.dob}
            rid = res.reservation_id
            return Op("passengers", "update_reservation_passengers", {"reservation_id": rid, "passengers": passengers},
                      [_res_read(rid)], f"replace passenger {res.passengers[0].first_name} "
                      f"{res.passengers[0].last_name} with {new.first_name} {new.last_name} (born {new.dob}) "
                      f"on reservation {rid}", reservation_id=rid)
    elif kind in ("cabin", "change"):
        for res in reservations:
            pay = _card(user)
            if pay is None or not pay.startswith("credit_card"):
                continue
            flights = [{"flight_number": f.flight_number, "date": f.date} for f in res.flights]
            cabin = res.cabin
            if kind == "cabin":
                options = [c for c in ("economy", "business") if c != res.cabin and all(
                    _seats(db, f.flight_number, f.date, c) >= len(res.passengers) for f in res.flights)]
                if not options:
                    continue
                cabin = rng.choice(options)
                say = f"upgrade reservation {res.reservation_id} to {cabin} (pay with {pay})"
            else:
                if res.cabin == "basic_economy":
                    continue
                swap = _alternative_segment(db, res, rng)
                if swap is None:
                    continue
                i, new_flight = swap
                flights[i] = new_flight
                say = (f"move the {res.flights[i].flight_number} flight on {res.flights[i].date} of reservation "
                       f"{res.reservation_id} to {new_flight['flight_number']} on {new_flight['date']} (pay with {pay})")
            rid = res.reservation_id
            return Op(kind, "update_reservation_flights",
                      {"reservation_id": rid, "cabin": cabin, "flights": flights, "payment_id": pay},
                      [_res_read(rid)], say, reservation_id=rid)
    elif kind == "certificate":
        if not (user.membership in ("silver", "gold") or any(
                r.insurance == "yes" or r.cabin == "business" for r in (db.reservations.get(x) for x in user.reservations) if r)):
            return None
        for rid in user.reservations:
            res = db.reservations.get(rid)
            if res is None or rid in exclude:
                continue
            statuses = _segment_statuses(db, res)
            if "cancelled" in statuses or "delayed" in statuses:
                per = 100 if "cancelled" in statuses else 50
                amount = per * len(res.passengers)
                seg = res.flights[statuses.index("cancelled" if per == 100 else "delayed")]
                # eligibility shows on the reservation itself when it is insured or business
                reads = ([_res_read(rid)] if res.insurance == "yes" or res.cabin == "business"
                         else [("get_user_details", {"user_id": user_id}), _res_read(rid)])
                return Op("certificate", "send_certificate", {"user_id": user_id, "amount": amount}, reads,
                          f"complain that flight {seg.flight_number} on {seg.date} of reservation {rid} was "
                          f"{'cancelled' if per == 100 else 'delayed'} and ask for compensation",
                          info=[str(amount)], reservation_id=rid)
    elif kind == "book":
        return _booking(db, user, rng)
    return None


def _alternative_segment(db, res, rng) -> tuple[int, dict] | None:
    for i in rng.sample(range(len(res.flights)), len(res.flights)):
        seg = res.flights[i]
        for f in sorted(db.flights.values(), key=lambda f: f.flight_number):
            if f.origin != seg.origin or f.destination != seg.destination:
                continue
            dates = [d for d, s in f.dates.items() if s.status == "available" and d != seg.date
                     and s.available_seats[res.cabin] >= len(res.passengers)]
            if dates:
                return i, {"flight_number": f.flight_number, "date": rng.choice(sorted(dates))}
    return None


def _booking(db, user, rng) -> Op | None:
    flights = sorted(db.flights.values(), key=lambda f: f.flight_number)
    for _ in range(20):
        f = rng.choice(flights)
        dates = sorted(d for d, s in f.dates.items() if s.status == "available")
        if not dates:
            continue
        date = rng.choice(dates)
        status = f.dates[date]
        cabin = rng.choice(["economy", "business", "basic_economy"])
        passengers = [{"first_name": user.name.first_name, "last_name": user.name.last_name, "dob": user.dob}]
        if user.saved_passengers and rng.random() < 0.5:
            p = user.saved_passengers[0]
            passengers.append({"first_name": p.first_name, "last_name": p.last_name, "dob": p.dob})
        if status.available_seats[cabin] < len(passengers):
            continue
        total = status.prices[cabin] * len(passengers)
        pay = _card(user, total)
        if pay is None:
            continue
        args = {"user_id": user.user_id, "origin": f.origin, "destination": f.destination, "flight_type": "one_way",
                "cabin": cabin, "flights": [{"flight_number": f.flight_number, "date": date}],
                "passengers": passengers, "payment_methods": [{"payment_id": pay, "amount": total}],
                "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}
        who = " and ".join(f"{p['first_name']} {p['last_name']}" for p in passengers)
        # the user names the travellers and the payment method; the profile gives their birth dates and the
        # search justifies flight and price
        return Op("book", "book_reservation", args,
                  [("get_user_details", {"user_id": user.user_id}),
                   ("search_direct_flight", {"origin": f.origin, "destination": f.destination, "date": date})],
                  f"book a one-way {cabin.replace('_', ' ')} flight {f.flight_number} from {f.origin} to {f.destination} on {date} for "
                  f"{who}, no bags, no insurance (pay with {pay})", info=[str(total)])
    return None
