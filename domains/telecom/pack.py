"""The tau2 telecom domain: its maps and hooks (see ``envs/packs.py`` for each field).

Dual control: the user's device has its own tools and state. The tau2
environment loads inside ``environment()``, so registering the pack stays cheap.
"""
from __future__ import annotations

from typing import Any

from envs.packs import DomainPack


class TelecomPack(DomainPack):
    name = "telecom"
    description = "tau2-bench telecom: lines, plans, bills, and the user's own device"

    def environment(self):
        from envs.tau2.domain import Tau2Domain, Tau2Source

        # a small agent DB plus a user-device DB: episodes deep-copy both
        return Tau2Domain(Tau2Source(name=self.name, module="tau2.domains.telecom.environment",
                                     copy_on_write=False))

    # ------------------------------------------------------------ observed factors
    family_by_tool = {"refuel_data": "plan_change", "send_payment_request": "billing_issue",
                      "suspend_line": "line_management", "resume_line": "line_management",
                      "enable_roaming": "service_troubleshooting", "disable_roaming": "service_troubleshooting"}
    family_keywords = [("bill", "billing_issue"), ("pay", "billing_issue"), ("plan", "plan_change"),
                       ("data", "plan_change"), ("suspend", "line_management"), ("line", "line_management"),
                       ("device", "device_upgrade")]
    default_family = "service_troubleshooting"
    state_changes = ["none", "modify", "mixed"]

    # ------------------------------------------------------------ tool-use patterns
    shape_values = {"lookup_then_modify": "lookup_then_update", "multi_entity": "multi_hop_retrieval",
                    "check_before_action": "verify_before_action", "confirmed_change": "state_change_with_confirmation"}
    profile_reads = ("get_customer_by_",)
    identify_reads = ("get_customer_by_",)
    entity_keys = ("line_id", "customer_id")
    gated_prefixes = ("suspend",)

    def extra_write(self, arguments: list[dict[str, Any]]):
        from storage.records import ToolCall

        line = next((a for a in arguments if "customer_id" in a and "line_id" in a), None)
        if line is None:
            return None
        return ToolCall(id="extra", name="suspend_line", arguments={
            "customer_id": line["customer_id"], "line_id": line["line_id"], "reason": "extra"})
