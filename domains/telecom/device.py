"""Faults the embedded telecom generator can put on the user's phone, and their fixes.

Each fault is what tau2's official telecom tasks do in ``initial_state``: a few
user-side environment functions (``turn_airplane_mode_on``, ``unseat_sim_card``,
``break_vpn``, ...) that break the device, a symptom the user reports, the
diagnostic device reads the tech-support manual names for it, and the device
actions (requestor "user") that fix it, in the manual's order. Faults that the
agent must also act on (the line's roaming, the data allowance) add agent-side
steps in ``ops.py``; this module holds only the device side.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

USER = "user"
_SPEED = re.compile(r"Speed Test Result: (\d+\.\d{2}) Mbps \(([^)]*)\)\.")  # tau2's run_speed_test
_NO_SPEED = "Speed test failed: "


def init(func: str, env: str = USER, **arguments: Any) -> dict[str, Any]:
    """One tau2 ``EnvFunctionCall`` of an ``initial_state``."""
    return {"env_type": env, "func_name": func, "arguments": arguments}


@dataclass(frozen=True)
class Fault:
    name: str
    symptom: str  # what the user reports
    breaks: list[dict[str, Any]]  # initialization actions that put the device in this state
    diagnose: list[tuple]  # user-side reads that reveal it, (tool, args, "user")
    fix: list[tuple]  # user-side writes that repair it
    mms: bool = False  # an MMS fault (checked with can_send_mms, not the speed test)
    setup: bool = False  # also a step of setting up a new phone (device_upgrade)
    excludes: tuple[str, ...] = field(default=())  # faults it cannot be combined with


def _u(tool: str, **arguments: Any) -> tuple:
    return (tool, arguments, USER)


FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("airplane_mode", "my phone shows no service at all",
          [init("turn_airplane_mode_on")], [_u("check_status_bar")], [_u("toggle_airplane_mode")]),
    Fault("sim_unseated", "my phone says there is no SIM card",
          [init("unseat_sim_card")], [_u("check_sim_status")], [_u("reseat_sim_card")]),
    Fault("data_off", "mobile data does not work",
          [init("turn_data_off")], [_u("check_network_status")], [_u("toggle_data")], setup=True),
    Fault("data_saver", "mobile data is very slow",
          [init("turn_data_saver_mode_on")], [_u("check_data_restriction_status")], [_u("toggle_data_saver_mode")],
          setup=True),
    Fault("vpn_slow", "my internet became very slow since I installed a VPN",
          [init("break_vpn")], [_u("check_vpn_status")], [_u("disconnect_vpn")]),
    Fault("network_2g", "my data is much slower than it should be",
          [init("set_network_mode_preference", mode="2g_only")], [_u("check_network_mode_preference")],
          [_u("set_network_mode_preference", mode="4g_5g_preferred")], setup=True),
    Fault("apn_broken", "my phone lost service after I played with the network settings",
          [init("break_apn_settings")], [_u("check_apn_settings")], [_u("reset_apn_settings"), _u("reboot_device")],
          excludes=("apn_mms",)),
    Fault("apn_mms", "I cannot send picture messages",
          [init("break_apn_mms_setting")], [_u("check_apn_settings")], [_u("reset_apn_settings"), _u("reboot_device")],
          mms=True, setup=True, excludes=("apn_broken",)),
    Fault("mms_permission", "my messaging app cannot send pictures",
          [init("remove_app_permission", app_name="messaging", permission="storage")],
          [_u("check_app_permissions", app_name="messaging")],
          [_u("grant_app_permission", app_name="messaging", permission="storage")], mms=True, setup=True),
    Fault("wifi_calling_mms", "picture messages fail since I turned on Wi-Fi calling",
          [init("set_wifi_calling", enabled=True, mms_over_wifi=True)], [_u("check_wifi_calling_status")],
          [_u("toggle_wifi_calling")], mms=True, setup=True),
]}


def speed_test(user_tools: Any) -> tuple[float | None, str | None]:
    """The phone's speed test, read from tau2's public ``run_speed_test`` tool: (Mbps, description), or
    (None, why) without mobile data. tau2 rounds the speed to two decimals before the tool prints it with
    two, so the number read back is tau2's own, exactly (a task's ``assert_internet_speed`` needs that);
    a text of any other form raises rather than being misread."""
    text = user_tools.run_speed_test()
    if found := _SPEED.match(text):
        return float(found[1]), found[2]
    if text.startswith(_NO_SPEED):
        return None, text[len(_NO_SPEED):].removesuffix(".")
    raise ValueError(f"tau2's run_speed_test said {text!r}, a form this does not read")


def device_works(episode: Any, mms: bool) -> bool:
    """The repaired device: mobile data works at excellent speed (or MMS sends, for MMS faults)."""
    tools = episode.env.user_tools
    if not tools.assert_mobile_data_status(True):  # tau2's own check of the device's data
        return False
    if mms and not tools.assert_can_send_mms(True):
        return False
    _, desc = speed_test(tools)
    return mms or desc == "Excellent"


def compatible(names: list[str]) -> bool:
    return not any(other in FAULTS[n].excludes for n in names for other in names)
