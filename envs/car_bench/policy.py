"""CAR-bench's 19 policies: which are machine-checked here, and the checks.

AUT-POL rules are checked in code, in two places:

* by the tools themselves while they run (016 route start, 017 edits need an
  active navigation, 018 no new navigation over an active one, 019 keep a
  destination, 023 calendar only today, 024 weather only today): the episode
  collects them (``CarBenchEpisode.policy_errors``);
* over the whole trajectory by ``trajectory_violations`` (005, 009, 010, 011,
  013, 014, 018 for parallel edits), CAR-bench's way: what was called in
  earlier assistant turns, and the car's state at the end (so a sunroof opened
  before the sunshade in an earlier turn passes if the shade ends up open).

``check_write`` is the per-write hook of the domain pack (the core's strict
policy check, before each write): the ordering parts of the rules above (the
weather looked up before opening the sunroof, the lights looked at before
switching fog lights or high beams, parallel navigation edits), the
preconditions on the state before the call (the sunshade open before the
sunroof, 005; no high beams while the fog lights are on, 014) and the explicit
confirmation that ``send_email``, ``open_close_trunk_door`` and
``set_head_lights_high_beams`` need (LLM-POL:004 in CAR-bench, checked here by
the shared confirmation rule).

LLM-POL rules (``LLM_POLICIES``) are judged by an LLM in CAR-bench; they are
not machine-checked here, and the reward's policy component leaves them out
unless a judge is given to ``evosyn.envs.car_bench.reward.reward``.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from evosyn.envs.car_bench.state import CarState
from evosyn.envs.car_bench.tools import CONFIRMATION_TOOLS
from evosyn.envs.policies.common import confirmation_rule
from evosyn.storage.records import Message, ToolCall

if TYPE_CHECKING:
    from evosyn.envs.base import Episode

AUT_POLICIES = {
    "005": "The sunroof opens only if the sunshade is fully open or opened in the same step.",
    "009": "The weather is checked before the sunroof is opened.",
    "010": "Front or all-window defrost comes with fan level >= 2, airflow on the windshield and the AC on.",
    "011": "Air conditioning on comes with windows at most 20% open and the fan at least level 1.",
    "013": "Fog lights on come with low beams on and high beams off.",
    "014": "High beams stay off while the fog lights are on.",
    "016": "A route starts at the car's current location.",
    "017": "Route edits need an active navigation.",
    "018": "An active navigation is edited, one edit per step, never replaced by a new one.",
    "019": "A route keeps a destination: the only destination is not deleted.",
    "023": "The calendar is read for the current day only.",
    "024": "The weather is requested for the current day only.",
}
LLM_POLICIES = {
    "002": "Metric units and the 24 h clock.",
    "004": "Tools marked REQUIRES_CONFIRMATION need the user's explicit yes after the details were listed.",
    "007": "Opening windows over 25% while the AC is on needs a warning and a confirmation.",
    "008": "Opening the sunroof or switching fog lights in unsuitable weather needs a confirmation.",
    "012": "A zone temperature more than 3 degrees off the others is pointed out.",
    "021": "A route presented in detail that has toll roads is said to have them.",
    "022": "A multi-stop route without a stated choice takes the fastest leg each time and says so.",
}
# all five route edits: CAR-bench's own checker names two of them wrongly and so misses parallel deletes
NAV_EDITS = frozenset({"navigation_add_one_waypoint", "navigation_delete_destination", "navigation_delete_waypoint",
                       "navigation_replace_final_destination", "navigation_replace_one_waypoint"})


def _args(call: ToolCall) -> dict[str, Any]:
    args = call.arguments
    return json.loads(args) if isinstance(args, str) else args


def _first(calls: list[ToolCall], name: str) -> dict[str, Any] | None:
    call = next((c for c in calls if c.name == name), None)
    return _args(call) if call is not None else None


def step_violations(calls: list[ToolCall], before: set[str], final: CarState | None) -> list[str]:
    """The AUT rules for one assistant turn's parallel ``calls``: ``before`` holds the tools called in earlier
    turns; ``final`` is the state the rules on outcomes look at (None: the ordering parts only)."""
    names = {c.name for c in calls}
    out = []
    roof = _first(calls, "open_close_sunroof")
    if roof is not None and roof.get("percentage") != 0:
        if final is not None and final.sunshade_position < roof.get("percentage", 0) \
                and "open_close_sunshade" not in names:
            out.append("AUT-POL:005: sunroof opened while the sunshade was not fully open")
        if "get_weather" not in before:
            out.append("AUT-POL:009: sunroof opened without checking the weather first")
    defrost = _first(calls, "set_window_defrost")
    if defrost is not None and defrost.get("on") is True and defrost.get("defrost_window") in ("ALL", "FRONT"):
        if not ("get_climate_settings" in before
                or {"set_fan_speed", "set_fan_airflow_direction", "set_air_conditioning"} <= before):
            out.append("AUT-POL:010: climate settings not checked before the front defrost")
        if final is not None and (final.fan_speed < 2 or "WINDSHIELD" not in final.fan_airflow_direction
                                  or not final.air_conditioning):
            out.append("AUT-POL:010: front defrost without fan >= 2, windshield airflow and AC on")
    ac = _first(calls, "set_air_conditioning")
    if ac is not None and ac.get("on") is True:
        # CAR-bench asks for the check only once the windows were looked at or moved
        looked = "get_vehicle_window_positions" in before or "open_close_window" in before
        if looked and not ("get_climate_settings" in before or {"open_close_window", "set_fan_speed"} <= before):
            out.append("AUT-POL:011: climate settings or windows not checked before switching the AC on")
        if final is not None and (final.fan_speed == 0 or max(
                final.window_driver_position, final.window_passenger_position,
                final.window_driver_rear_position, final.window_passenger_rear_position) > 20):
            out.append("AUT-POL:011: AC on with a window open over 20% or the fan off")
    fog = _first(calls, "set_fog_lights")
    if fog is not None and fog.get("on") is True:
        if not ("get_exterior_lights_status" in before
                or {"set_head_lights_low_beams", "set_head_lights_high_beams"} <= before):
            out.append("AUT-POL:013: headlights not checked before switching the fog lights on")
        if final is not None and (not final.head_lights_low_beams or final.head_lights_high_beams):
            out.append("AUT-POL:013: fog lights on without low beams on and high beams off")
    high = _first(calls, "set_head_lights_high_beams")
    if high is not None and high.get("on") is True:
        if not ("get_exterior_lights_status" in before or "set_fog_lights" in before):
            out.append("AUT-POL:014: fog lights not checked before switching the high beams on")
        if final is not None and final.fog_lights:
            out.append("AUT-POL:014: high beams on while the fog lights are on")
    if sum(c.name in NAV_EDITS for c in calls) > 1:
        out.append("AUT-POL:018: several navigation edits in one parallel step")
    return out


def trajectory_violations(messages: list[Message], final: CarState) -> list[str]:
    """Every AUT rule CAR-bench checks over a finished trajectory, on its final state."""
    out: list[str] = []
    before: set[str] = set()
    for m in messages:
        if m.role != "assistant" or not m.tool_calls:
            continue
        out += step_violations(m.tool_calls, before, final)
        before |= {c.name for c in m.tool_calls}
    return out


def check_write(episode: Episode, call: ToolCall, history: list[Message]) -> list[str]:
    """The pack's per-write rules, before ``call`` runs; ``history`` ends with the message that makes it."""
    if call.requestor != "assistant":
        return []
    turn = history[-1].tool_calls if history and call in history[-1].tool_calls else [call]
    before = {c.name for m in history[:-1] if m.role == "assistant" for c in m.tool_calls}
    own = {"open_close_sunroof": ("005", "009"), "set_window_defrost": ("010",), "set_air_conditioning": ("011",),
           "set_fog_lights": ("013",), "set_head_lights_high_beams": ("014",)}
    codes = own.get(call.name, ("018",) if call.name in NAV_EDITS else ())
    found = step_violations(turn, before, None)
    # the sunshade and the fog lights are preconditions: the state before the call must already allow it
    found += [v for v in step_violations(turn, before, episode.state) if v[8:11] in ("005", "014") and v not in found]
    found = [f"[{v[:11]}] {v}" for v in found if v[8:11] in codes]
    if call.name in CONFIRMATION_TOOLS:
        found += confirmation_rule(episode, call, history)
    return found
