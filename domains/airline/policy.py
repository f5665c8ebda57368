"""Machine-checkable rules of the tau2 airline policy (policy.md), on the state before a write.

Covered: explicit confirmation before every write; basic-economy flights cannot
be changed; no cabin change once a segment has flown; flight changes paid by a
single credit card or gift card from the profile; cancellation eligibility
(booked within 24 h, airline-cancelled flight, business cabin, or insurance) and
no cancellation after a segment has flown; checked bags can be added, never
removed; the passenger count never changes; compensation only for silver/gold
members, insured or business travellers, in multiples of $50; bookings of at
most five passengers with at most one certificate, one credit card and three
gift cards. Reasons given in conversation (e.g. "health") are not machine-checkable.

Each violation starts with a rule code in brackets. ``OFFICIAL_WAIVERS`` lists
the official tau2 tasks whose gold actions contradict the policy text; the
verifier waives exactly those rules for exactly those (unmodified) tasks and
says so in the check's reason.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from evosyn.envs.base import Episode
from evosyn.envs.policies.common import confirmation_rule
from evosyn.envs.tau2.cow import peek
from evosyn.storage.records import Message, ToolCall

NOW = datetime(2024, 5, 15, 15, 0, 0)  # tau2 airline's fixed clock (AirlineTools._get_datetime)
FLOWN = {"landed", "flying"}

OFFICIAL_WAIVERS: dict[str, dict[str, str]] = {
    "7": {"cancel_eligibility": "gold upgrades basic economy XEHM4B to economy, then cancels it "
                                "(no insurance, booked 2024-05-01)"},
    "9": {"flown_segment": "gold cancels NQNU5R although both its segments have landed"},
    "37": {"flown_segment": "gold cancels NQNU5R although both its segments have landed"},
}


def _db(episode: Episode):
    return episode.env.tools.db  # type: ignore[attr-defined]


def _segment_status(db, flight_number: str, date: str) -> str | None:
    flight = peek(db.flights, flight_number)
    if flight is None or date not in flight.dates:
        return None
    return flight.dates[date].status


def _payment_source(db, user_id: str, payment_id: str) -> str | None:
    user = peek(db.users, user_id)
    method = user.payment_methods.get(payment_id) if user else None
    return method.source if method else None


def _reservation_rules(db, call: ToolCall) -> list[str]:
    args = call.arguments
    res = peek(db.reservations, args.get("reservation_id", ""))
    if res is None:
        return []  # the tool itself reports a missing reservation
    out = []
    flown = any(_segment_status(db, f.flight_number, f.date) in FLOWN for f in res.flights)
    if call.name == "cancel_reservation":
        if flown:
            out.append("[flown_segment] cancel_reservation: a segment has already flown (transfer needed, not cancellation)")
        created = datetime.fromisoformat(res.created_at)
        eligible = (NOW - created <= timedelta(hours=24) or res.cabin == "business"
                    or res.insurance == "yes"
                    or any(_segment_status(db, f.flight_number, f.date) == "cancelled" for f in res.flights))
        if not eligible:
            out.append("[cancel_eligibility] cancel_reservation: not eligible (booked over 24 h ago, not business, "
                       "no insurance, no airline cancellation)")
    elif call.name == "update_reservation_flights":
        new = {(f.get("flight_number"), f.get("date")) for f in args.get("flights", []) if isinstance(f, dict)}
        old = {(f.flight_number, f.date) for f in res.flights}
        if res.cabin == "basic_economy" and new != old:
            out.append("[basic_economy_change] update_reservation_flights: basic economy flights cannot be modified")
        if args.get("cabin") != res.cabin and flown:
            out.append("[flown_segment] update_reservation_flights: cabin cannot change after a segment has flown")
        source = _payment_source(db, res.user_id, args.get("payment_id", ""))
        if new != old and source not in ("credit_card", "gift_card"):
            out.append("[change_payment] update_reservation_flights: flight changes need a credit card or gift card "
                       "from the profile")
    elif call.name == "update_reservation_baggages":
        if int(args.get("total_baggages", 0)) < res.total_baggages:
            out.append("[bags_removed] update_reservation_baggages: checked bags can be added but not removed")
    elif call.name == "update_reservation_passengers":
        if len(args.get("passengers", [])) != len(res.passengers):
            out.append("[passenger_count] update_reservation_passengers: the number of passengers cannot change")
    return out


def _certificate_rules(db, call: ToolCall) -> list[str]:
    user = peek(db.users, call.arguments.get("user_id", ""))
    if user is None:
        return []
    out = []
    covered = user.membership in ("silver", "gold") or any(
        (r := peek(db.reservations, rid)) is not None and (r.insurance == "yes" or r.cabin == "business")
        for rid in user.reservations)
    if not covered:
        out.append("[compensation_eligibility] send_certificate: regular member without insurance or business "
                       "travel gets no compensation")
    amount = call.arguments.get("amount")
    if not isinstance(amount, (int, float)) or amount <= 0 or amount % 50:
        out.append(f"[compensation_amount] send_certificate: amount {amount!r} is not a positive multiple of $50")
    return out


def _booking_rules(db, call: ToolCall) -> list[str]:
    args = call.arguments
    out = []
    if len(args.get("passengers", [])) > 5:
        out.append("[booking_passengers] book_reservation: at most five passengers per reservation")
    sources = [_payment_source(db, args.get("user_id", ""), p.get("payment_id", ""))
               for p in args.get("payment_methods", []) if isinstance(p, dict)]
    limits = {"certificate": 1, "credit_card": 1, "gift_card": 3}
    for source, limit in limits.items():
        if sources.count(source) > limit:
            out.append(f"[booking_payment] book_reservation: at most {limit} {source.replace('_', ' ')} payment(s)")
    return out


def check_write(episode: Episode, call: ToolCall, history: list[Message]) -> list[str]:
    out = confirmation_rule(episode, call, history)
    db = _db(episode)
    if call.name in ("cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
                     "update_reservation_passengers"):
        out += _reservation_rules(db, call)
    elif call.name == "send_certificate":
        out += _certificate_rules(db, call)
    elif call.name == "book_reservation":
        out += _booking_rules(db, call)
    return out
