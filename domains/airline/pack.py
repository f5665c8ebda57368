"""The tau2 airline domain: its maps, rules, phrasing and hooks (see ``envs/packs.py`` for each field).

Heavy pieces (the tau2 environment, the policy rules, the embedded generator)
load inside the hook that needs them, so registering the pack stays cheap.
"""
from __future__ import annotations

from typing import Any

from evosyn.envs import properties
from evosyn.envs.packs import PlannerRules, UserPhrasing
from evosyn.envs.tau2.pack import Tau2Pack


# Compatibility rules of the embedded planner: a refusal must name a policy focus the request
# can violate; a task with no reads is a categorical refusal (a booking for six, a third
# traveller); a fulfilment without writes is an information request.
PLANNER_RULES = PlannerRules(
    violable={
        "flight_booking": ["passenger_or_identity_constraint", "payment_or_credit_constraint"],
        "flight_change": ["fare_rule_constraint"],
        "flight_cancellation": ["refund_eligibility", "change_or_cancellation_fee", "time_window_constraint"],
        "refund_or_compensation": ["compensation_eligibility", "loyalty_status_constraint"],
        "seat_or_baggage_service": ["passenger_or_identity_constraint", "fare_rule_constraint"],
        "loyalty_or_membership_service": ["loyalty_status_constraint"],
    },
    no_read_refusals=["flight_booking", "seat_or_baggage_service"],
    info_families=["loyalty_or_membership_service", "refund_or_compensation"],
    # declining compensation needs both the membership and the reservation: two lookups
    min_refusal_reads={"refund_or_compensation": 2},
)

PHRASING = UserPhrasing(
    identity="My user id is {user_id}.",
    known_identity="Your user id is {user_id}.",
    give_identity="Sure, it is {user_id}.",
    ask_identity="I can help with that. Could you please give me your user id first?",
    vague_opening="I need help with one of my bookings.",
    vague_hint="one of my bookings",
    stress="Please be quick, this trip is really stressing me out.",
    unknown_info="You do not know the airline's internal rules.",
    identity_words=("user id",),
)


class AirlinePack(Tau2Pack):
    name = "airline"
    default = True
    description = "tau2-bench airline: flights, reservations, baggage, compensation"

    tau2_module = "tau2.domains.airline.environment"  # policy: policy.py (check_write, OFFICIAL_WAIVERS)
    # SHA-256 of tau2-bench's tasks.json per release (github.com/sierra-research/tau2-bench, the tags' data/tau2/
    # domains/airline/tasks.json): an official score names the release its tasks are (envs/task_sets.py)
    task_releases = {"40d692b3fca780f46b56d48b447fd8db79a653f216667b8ed7c1a88380544532": "tau2-bench v0.1.0-v0.2.0",
                     "ccd8ba737b4cc371415af70151187788f728d6108d0916e73bb4317b40542052": "tau2-bench v1.0.0-v1.0.1"}

    # ------------------------------------------------------------ observed factors
    family_by_tool = {"book_reservation": "flight_booking", "update_reservation_flights": "flight_change",
                      "cancel_reservation": "flight_cancellation", "send_certificate": "refund_or_compensation",
                      "update_reservation_baggages": "seat_or_baggage_service",
                      "update_reservation_passengers": "seat_or_baggage_service"}
    family_keywords = [("cancel", "flight_cancellation"), ("compensat", "refund_or_compensation"),
                       ("refund", "refund_or_compensation"), ("certificate", "refund_or_compensation"),
                       ("bag", "seat_or_baggage_service"), ("passenger", "seat_or_baggage_service"),
                       ("seat", "seat_or_baggage_service"), ("book", "flight_booking"),
                       ("change", "flight_change"), ("modify", "flight_change"),
                       ("member", "loyalty_or_membership_service"), ("status", "loyalty_or_membership_service")]
    default_family = "flight_change"
    focus_by_tool = {"book_reservation": "payment_or_credit_constraint",
                     "update_reservation_flights": "fare_rule_constraint",
                     "cancel_reservation": "refund_eligibility", "send_certificate": "compensation_eligibility",
                     "update_reservation_baggages": "payment_or_credit_constraint",
                     "update_reservation_passengers": "passenger_or_identity_constraint"}
    change_kind_by_prefix = [("book", "create"), ("cancel", "cancel"), ("send_certificate", "compensate")]
    state_changes = ["none", "create", "modify", "cancel", "compensate", "mixed"]

    # ------------------------------------------------------------ tool-use patterns
    shape_values = {"search_then_create": "search_compare_then_book",
                    "lookup_then_modify": "lookup_verify_then_modify",
                    "multi_entity": "multi_entity_retrieval", "check_before_action": "policy_check_before_action",
                    "calculation": "price_or_fee_recalculation", "confirmed_change": "state_change_with_confirmation",
                    "split_action": "partial_update_or_split_action"}
    profile_reads = ("get_user_details",)
    identify_reads = ("get_user_details",)
    entity_keys = ("reservation_id",)
    gated_prefixes = ("cancel", "send_certificate")
    money_keys = ("amount", "payment_methods", "payment_id")
    create_prefixes = ("book",)
    search_prefixes = ("search", "list")
    split_keys = ("payment_methods",)
    confirmation_stopwords = ("reservation",)

    def moves_money(self, name: str, arguments: dict[str, Any]) -> bool:
        if name == "update_reservation_baggages":  # a baggage change moves money only when some bags are paid
            return int(arguments.get("nonfree_baggages") or 0) > 0
        return super().moves_money(name, arguments)

    def extra_write(self, arguments: list[dict[str, Any]]):
        from evosyn.storage.records import ToolCall

        user_id = next((a["user_id"] for a in arguments if "user_id" in a), None)
        if not user_id:
            return None
        return ToolCall(id="extra", name="send_certificate", arguments={"user_id": user_id, "amount": 50})

    # ------------------------------------------------------------ synthesis
    planner_rules = PLANNER_RULES
    phrasing = PHRASING
    # every bucket of each is realized (tests/domains/test_controllable.py)
    controllable = properties.controllable("num_write", "num_read", "entities_touched", "multi_item", "money_moves",
                                           "policy_gated", "distinct_tools", "write_mix", "interleaved")

    def task_builder(self, domain, prior):
        from evosyn.domains.airline.generator import AirlineGenerator

        return AirlineGenerator(domain, prior)

    def clock(self) -> str:
        from evosyn.domains.airline.policy import NOW

        return str(NOW)

    def candidate_entities(self, domain, rng, k: int = 4) -> dict[str, Any]:
        """A seeded sample of customers with their reservations."""
        db = getattr(getattr(domain, "cow", None), "base", None)
        if db is None or not hasattr(db, "users") or not hasattr(db, "reservations"):
            return super().candidate_entities(domain, rng, k)
        from evosyn.agents.plans import linked, sample_up_to

        users = []
        for uid in sample_up_to(rng, sorted(db.users), k):
            u = db.users[uid]
            res = []
            for rid, r in linked(db.reservations, u.reservations[:6]):
                res.append({"reservation_id": rid, "route": f"{r.origin}-{r.destination}", "type": r.flight_type,
                            "cabin": r.cabin, "created_at": r.created_at, "status": r.status or "active",
                            "insurance": r.insurance, "passengers": len(r.passengers), "bags": r.total_baggages,
                            "flights": [f"{f.flight_number} {f.date}" for f in r.flights]})
            users.append({"user_id": uid, "membership": u.membership,
                          "payment_methods": {pid: p.source for pid, p in u.payment_methods.items()},
                          "reservations": res})
        return {"now": self.clock(), "customers": users}
