"""The tau2 telecom domain: its maps and hooks (see ``envs/packs.py`` for each field).

Dual control: the user's device has its own tools and state. The tau2
environment loads inside ``environment()``, so registering the pack stays cheap.
"""
from __future__ import annotations

from typing import Any

from evosyn.domains.telecom.hooks import CONTROLLABLE, PHRASING, PLANNER_RULES
from evosyn.envs.tau2.pack import Tau2Pack


class TelecomPack(Tau2Pack):
    name = "telecom"
    description = "tau2-bench telecom: lines, plans, bills, and the user's own device"

    tau2_module = "tau2.domains.telecom.environment"  # policy: policy.py (check_write, OFFICIAL_WAIVERS)
    # SHA-256 of tau2-bench's tasks.json per release (github.com/sierra-research/tau2-bench, the tags' data/tau2/
    # domains/telecom/tasks.json): an official score names the release its tasks are (envs/task_sets.py)
    task_releases = {"192a2c143b3b512c37c3775fdf6c5040c33717388620c38b140c731dc6153cd7": "tau2-bench v0.1.0-v0.2.0",
                     "37e562e1ae3242577407e1303b1548bc64e7ea68e37d36173e6747990ceaf8a4": "tau2-bench v1.0.0-v1.0.1"}
    copy_on_write = True  # the agent DB's lists of lines, bills, ... and the device DB: copied on write

    def sync_writes_agent_db(self, env: Any) -> bool:
        # tau2's TelecomEnvironment.sync_tools reads the line, plan, customer and bills of the user's phone
        # number and writes only the device DB, except that it marks a bill paid once the user has paid
        # the pending payment request (tests/envs/test_cow.py checks the base DB never changes)
        request = env.user_tools.db.surroundings.payment_request
        return request is not None and request.paid

    # ------------------------------------------------------------ synthesis
    planner_rules = PLANNER_RULES
    phrasing = PHRASING
    controllable = CONTROLLABLE

    def task_builder(self, domain, prior):
        from evosyn.domains.telecom.generator import TelecomGenerator

        return TelecomGenerator(domain, prior)

    def candidate_entities(self, domain, rng, k: int = 4) -> dict[str, Any]:
        from evosyn.domains.telecom.hooks import candidate_entities

        return candidate_entities(domain, rng, k)

    def moves_money(self, name: str, arguments: dict[str, Any]) -> bool:
        return name in ("refuel_data", "send_payment_request", "make_payment")

    # ------------------------------------------------------------ observed factors
    _DEVICE_FIXES = ("toggle_airplane_mode", "reseat_sim_card", "toggle_data", "toggle_data_saver_mode",
                     "disconnect_vpn", "set_network_mode_preference", "reset_apn_settings", "reboot_device",
                     "grant_app_permission", "toggle_wifi_calling", "toggle_roaming")
    family_by_tool = {"refuel_data": "plan_change", "send_payment_request": "billing_issue",
                      "make_payment": "billing_issue", "resume_line": "line_management",
                      "suspend_line": "line_management", "enable_roaming": "line_management",
                      "disable_roaming": "account_profile_update",
                      **{tool: "service_troubleshooting" for tool in _DEVICE_FIXES}}
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
        from evosyn.domains.telecom.hooks import extra_write

        return extra_write(arguments)
