"""The tau2 retail domain: its maps and hooks (see ``envs/packs.py`` for each field).

The tau2 environment loads inside ``environment()``, so registering the pack stays cheap.
"""
from __future__ import annotations

from typing import Any

from envs.packs import DomainPack


class RetailPack(DomainPack):
    name = "retail"
    description = "tau2-bench retail: orders, returns, exchanges, payment methods"

    def environment(self):
        from envs.tau2.domain import Tau2Domain, Tau2Source

        return Tau2Domain(Tau2Source(name=self.name, module="tau2.domains.retail.environment",
                                     copy_on_write=True))

    def policy_rules(self):
        from envs.policies.common import confirmation_rule

        return confirmation_rule

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

    def extra_write(self, arguments: list[dict[str, Any]]):
        from storage.records import ToolCall

        user_id = next((a["user_id"] for a in arguments if "user_id" in a), None)
        if not user_id:
            return None
        return ToolCall(id="extra", name="modify_user_address", arguments={
            "user_id": user_id, "address1": "1 Extra St", "address2": "", "city": "Austin", "state": "TX",
            "country": "USA", "zip": "78701"})
