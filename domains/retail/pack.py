"""The tau2 retail domain: its maps and hooks (see ``envs/packs.py`` for each field).

The tau2 environment loads inside ``environment()``, so registering the pack stays cheap.
"""
from __future__ import annotations

from typing import Any

from evosyn.envs import properties
from evosyn.envs.packs import PlannerRules, UserPhrasing
from evosyn.envs.tau2.pack import Tau2Pack


# Compatibility rules of the embedded planner (measured on the generator, tests/domains/retail/feasibility.py):
# a refusal names a focus its family can break; a categorical refusal (an unaccepted cancellation
# reason, a change to another product type, another customer's order) needs no lookup; logistics
# and return refusals need the authentication and the order lookup; every family can be a pure
# information request.
PLANNER_RULES = PlannerRules(
    violable={
        "order_cancellation": ["cancellation_reason_validity", "order_status_precondition"],
        "order_item_modification": ["once_per_order_action_lock", "order_status_precondition",
                                    "payment_or_giftcard_balance", "product_variant_match"],
        "order_logistics_modification": ["order_status_precondition", "payment_or_giftcard_balance"],
        "return_delivered_order": ["order_status_precondition", "payment_or_giftcard_balance"],
        "exchange_delivered_order": ["order_status_precondition", "payment_or_giftcard_balance",
                                     "product_variant_match"],
        "profile_or_inquiry": ["identity_authentication"],
    },
    no_read_refusals=["order_cancellation", "order_item_modification", "exchange_delivered_order",
                      "profile_or_inquiry"],
    info_families=["order_cancellation", "order_item_modification", "order_logistics_modification",
                   "return_delivered_order", "exchange_delivered_order", "profile_or_inquiry"],
    min_refusal_reads={"order_logistics_modification": 2, "return_delivered_order": 2},
    # authentication, the order lookup, and the product lookup for item changes (feasibility.py)
    min_fulfil_reads={"profile_or_inquiry": 1, "order_cancellation": 2, "order_logistics_modification": 2,
                      "return_delivered_order": 2, "order_item_modification": 3, "exchange_delivered_order": 3},
    reads_per_extra_write=1,
)

PHRASING = UserPhrasing(
    identity="My user id is {user_id}.",
    known_identity="Your user id is {user_id}.",
    give_identity="Sure, it is {user_id}.",
    ask_identity="I can help with that. First I need to verify your identity: could you give me your email "
                 "address, or your first and last name and zip code?",
    vague_opening="I need help with one of my orders.",
    vague_hint="one of my orders",
    stress="Please be quick, this is really stressing me out.",
    unknown_info="You do not know the store's internal rules.",
    identity_words=("email", "zip code"),
)


class RetailPack(Tau2Pack):
    name = "retail"
    description = "tau2-bench retail: orders, returns, exchanges, payment methods"

    tau2_module = "tau2.domains.retail.environment"  # policy: policy.py (check_write, OFFICIAL_WAIVERS)
    # SHA-256 of tau2-bench's tasks.json per release (github.com/sierra-research/tau2-bench, the tags' data/tau2/
    # domains/retail/tasks.json): an official score names the release its tasks are (envs/task_sets.py)
    task_releases = {"76e1fa649a359bef2d2fd30eae834b99d261d84e2e5d364856f6632fdf778dfd": "tau2-bench v0.1.0-v0.2.0",
                     "8e03ebce7901bd6218e7a7dc3105faa9324091a68058f7fe61c65262868812e8": "tau2-bench v1.0.0-v1.0.1"}

    # ------------------------------------------------------------ observed factors
    family_by_tool = {"cancel_pending_order": "order_cancellation",
                      "modify_pending_order_items": "order_item_modification",
                      "modify_pending_order_address": "order_logistics_modification",
                      "modify_pending_order_payment": "order_logistics_modification",
                      "return_delivered_order_items": "return_delivered_order",
                      "exchange_delivered_order_items": "exchange_delivered_order",
                      "modify_user_address": "profile_or_inquiry"}
    family_keywords = [("cancel", "order_cancellation"), ("exchange", "exchange_delivered_order"),
                       ("return", "return_delivered_order"), ("address", "order_logistics_modification"),
                       ("payment", "order_logistics_modification"), ("modify", "order_item_modification")]
    default_family = "profile_or_inquiry"
    focus_by_tool = {"cancel_pending_order": "order_status_precondition",
                     "modify_pending_order_items": "product_variant_match",
                     "modify_pending_order_address": "order_status_precondition",
                     "modify_pending_order_payment": "payment_or_giftcard_balance",
                     "return_delivered_order_items": "order_status_precondition",
                     "exchange_delivered_order_items": "product_variant_match",
                     "modify_user_address": "identity_authentication"}
    change_kind_by_prefix = [("cancel", "cancel"), ("return", "return_exchange"), ("exchange", "return_exchange")]
    state_changes = ["none", "modify", "cancel", "return_exchange", "mixed"]

    # ------------------------------------------------------------ tool-use patterns
    shape_values = {"authenticate_then_act": "authenticate_then_act", "lookup_then_modify": "lookup_verify_then_modify",
                    "multi_entity": "multi_entity_retrieval", "check_before_action": "policy_check_before_action",
                    "calculation": "price_or_refund_calculation", "confirmed_change": "state_change_with_confirmation",
                    "batched_items": "batched_multi_item_action"}
    profile_reads = ("get_user_details", "find_user_id_by_")
    identify_reads = ("find_user_id_by_", "get_user_details")
    entity_keys = ("order_id",)
    gated_prefixes = ("cancel", "return", "exchange")
    money_keys = ("amount", "payment_method_id")
    batch_keys = ("item_ids",)
    confirmation_stopwords = ("order", "pending", "delivered", "items", "user")

    def extra_write(self, arguments: list[dict[str, Any]]):
        from evosyn.storage.records import ToolCall

        user_id = next((a["user_id"] for a in arguments if "user_id" in a), None)
        if not user_id:
            return None
        return ToolCall(id="extra", name="modify_user_address", arguments={
            "user_id": user_id, "address1": "1 Extra St", "address2": "", "city": "Austin", "state": "TX",
            "country": "USA", "zip": "78701"})

    # ------------------------------------------------------------ synthesis
    planner_rules = PLANNER_RULES
    phrasing = PHRASING
    # every bucket of each is realized (tests/domains/test_controllable.py)
    controllable = properties.controllable("num_write", "num_read", "entities_touched", "multi_item", "money_moves",
                                           "policy_gated", "distinct_tools", "write_mix", "interleaved")

    def task_builder(self, domain, prior):
        from evosyn.domains.retail.generator import RetailGenerator

        return RetailGenerator(domain, prior)

    def candidate_entities(self, domain, rng, k: int = 4) -> dict[str, Any]:
        """A seeded sample of customers with their orders and payment methods."""
        db = getattr(getattr(domain, "cow", None), "base", None)
        if db is None or not hasattr(db, "orders"):
            return super().candidate_entities(domain, rng, k)
        from evosyn.domains.retail.generator import sample_customers

        return {"customers": sample_customers(db, rng, k)}
