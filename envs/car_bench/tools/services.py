"""Charging (4), productivity and communication (5), weather (1) and user-preference (1) tools."""
from __future__ import annotations

from typing import Any

from rapidfuzz.distance import Levenshtein

from evosyn.envs.car_bench.state import POI_CATEGORIES, FixedContext
from evosyn.envs.car_bench.tools.base import (
    CarTool,
    ToolContext,
    ToolFailure,
    id_ok,
    integer,
    params,
    string,
)


# ------------------------------------------------------------ charging
def _plug(ctx: ToolContext, station: str, plug: str, code: str) -> dict[str, Any]:
    if not id_ok(station, "place"):
        raise ToolFailure(code + "_001", "malformed charging_station_id")
    if not id_ok(plug, "plug"):
        raise ToolFailure(code + "_002", "malformed charging_station_plug_id")
    found = next((p for p in ctx.data.pois.get(station, {}).get("charging_plugs", []) if p.get("plug_id") == plug), None)
    if found is None:
        raise ToolFailure(code + "_005", f"no plug {plug} at {station}")
    return found


def _power_at(fixed: FixedContext, soc: float, max_kw: float) -> float:
    """The charging curve: the power share of the first threshold at or above the state of charge."""
    curve = fixed.charging_curve_parameters
    for threshold, share in zip(curve["soc_tresholds"], curve["power_percentages"]):
        if soc <= threshold:
            return share / 100 * max_kw
    return 0.0


def _max_kw(fixed: FixedContext, plug: dict[str, Any]) -> float:
    car = fixed.max_charging_power_ac if plug["power_type"] == "AC" else fixed.max_charging_power_dc
    return min(car, plug["power_kw"])


def _minute_steps(fixed: FixedContext, soc: float, max_kw: float) -> float:
    """The state of charge one minute later (the curve is integrated minute by minute)."""
    return soc + _power_at(fixed, soc, max_kw) / 60 / fixed.usable_kwh * 100


def soc_by_time(ctx: ToolContext, charging_station_id: str, charging_station_plug_id: str,
                start_state_of_charge: int, charging_time: int) -> dict[str, Any]:
    if not 0 <= start_state_of_charge <= 100:
        raise ToolFailure("CALCULATE_CHARGING_SOC_BY_TIME_003", "start_state_of_charge must lie between 0 and 100")
    if charging_time < 0:
        raise ToolFailure("CALCULATE_CHARGING_SOC_BY_TIME_004", "charging_time must not be negative")
    plug = _plug(ctx, charging_station_id, charging_station_plug_id, "CALCULATE_CHARGING_SOC_BY_TIME")
    soc, max_kw = float(start_state_of_charge), _max_kw(ctx.fixed, plug)
    for _ in range(int(charging_time)):
        soc = _minute_steps(ctx.fixed, soc, max_kw)
    return {f"soc_in_percent_after_charging_for_{charging_time}min": f"{round(soc, 0)} percent"}


def time_by_soc(ctx: ToolContext, charging_station_id: str, charging_station_plug_id: str,
                start_state_of_charge: int, target_state_of_charge: int | None = None) -> dict[str, Any]:
    start, target = start_state_of_charge, target_state_of_charge
    if not 0 <= start <= 100 or (target is not None and not 0 <= target <= 100):
        raise ToolFailure("CALCULATE_CHARGING_TIME_003", "states of charge must lie between 0 and 100")
    if target is not None and start > target:
        raise ToolFailure("CALCULATE_CHARGING_TIME_005", "the start cannot lie above the target")
    plug = _plug(ctx, charging_station_id, charging_station_plug_id, "CALCULATE_CHARGING_TIME")
    max_kw = _max_kw(ctx.fixed, plug)
    out = {}
    for goal in [target] if target else [80, 100]:
        soc, minutes = float(start), 0
        while soc < goal - 1:  # "reached" one percent below the goal, where the curve flattens out
            soc, minutes = _minute_steps(ctx.fixed, soc, max_kw), minutes + 1
        out[f"time_from_{start}_until_{goal}_percent_soc"] = f"{minutes}min"
    return out


def charging_status(ctx: ToolContext) -> dict[str, Any]:
    f = ctx.fixed
    km = f.state_of_charge / 100 * f.usable_kwh / f.energy_consumption * 100
    return {"battery_capacity_kwh": f.battery_capacity_kwh, "max_charging_power_ac": f.max_charging_power_ac,
            "max_charging_power_dc": f.max_charging_power_dc, "state_of_charge": f.state_of_charge,
            "remaining_range": f"{round(km, 0)}km"}


def distance_by_soc(ctx: ToolContext, initial_state_of_charge: int, final_state_of_charge: int = 0) -> dict[str, Any]:
    start, end = initial_state_of_charge, final_state_of_charge
    if start < end:
        raise ToolFailure("GET_DISTANCE_BY_SOC_001", "initial_state_of_charge cannot lie below final_state_of_charge")
    f = ctx.fixed
    km = (start - end) / 100 * f.usable_kwh / f.energy_consumption * 100
    return {f"distance_km_for_{start}_until_{end}_percent_soc": f"{round(km, 0)}km"}


# ------------------------------------------------------------ productivity and communication
def contact_id(ctx: ToolContext, contact_first_name: str | None = None,
               contact_last_name: str | None = None) -> dict[str, Any]:
    """Names within edit distance 2 match; matches within 1 are all returned, else the closest one."""
    if not contact_first_name and not contact_last_name:
        raise ToolFailure("GET_CONTACT_ID_BY_CONTACT_NAME", "give a first name, a last name or both")
    matches = []
    for cid, contact in ctx.data.contacts.items():
        first, last = contact["name"]["first_name"].lower(), contact["name"]["last_name"].lower()
        parts = [(q.lower(), v) for q, v in ((contact_first_name, first), (contact_last_name, last)) if q]
        distances = [Levenshtein.distance(q, v) for q, v in parts]
        if all(d <= 2 for d in distances):
            matches.append((sum(distances), contact.get("id", cid), f"{first} {last}"))
    if not matches:
        raise ToolFailure("GET_CONTACT_ID_BY_CONTACT_NAME", "no contact by that name")
    matches.sort(key=lambda m: m[0])
    close = [m for m in matches if m[0] <= 1]
    if not close:
        return {"id": matches[0][1], "name": matches[0][2]}
    return {"matches": {cid: name for _, cid, name in close}}


def contact_information(ctx: ToolContext, contact_ids: list[str]) -> dict[str, Any]:
    for cid in contact_ids:
        if not id_ok(cid, "contact"):
            raise ToolFailure("GET_CONTACT_INFORMATION_001", f"malformed contact id {cid!r}")
    return {cid: ctx.data.contacts.get(cid) for cid in contact_ids}


def _today(ctx: ToolContext, month: Any, day: Any) -> bool:
    clock = ctx.fixed.current_datetime
    return int(month) == clock.month and int(day) == clock.day


def calendar(ctx: ToolContext, month: int, day: int) -> dict[str, Any]:
    if not _today(ctx, month, day):
        ctx.policy_errors.append("AUT-POL:023: the calendar can only be read for the current day")
        raise ToolFailure("GET_ENTRIES_FROM_CALENDAR_001", "only today's calendar entries can be requested")
    entry = ctx.data.calendars.get(ctx.calendar_id)
    if entry is None:
        raise ToolFailure("GET_ENTRIES_FROM_CALENDAR_002", f"calendar {ctx.calendar_id} not found")
    return {"date": entry["date"], "meetings": entry["meetings"]}


def call(ctx: ToolContext, phone_number: str) -> dict[str, Any]:
    ctx.set(phone_numbers_called=[*ctx.state.phone_numbers_called, phone_number])
    return {"phone_number_called": True}


def send_email(ctx: ToolContext, content_message: str, email_addresses: list[str]) -> dict[str, Any]:
    sent = list(ctx.state.email_addresses_sent_mail_to)
    for address in email_addresses:
        if address not in ctx.data.contact_emails:
            # addresses before the unknown one are already sent, as in CAR-bench
            ctx.set(email_addresses_sent_mail_to=sent)
            raise ToolFailure("SEND_EMAIL_001", f"{address} is not in the contacts")
        sent.append(address)
    ctx.set(email_addresses_sent_mail_to=sent)
    return {"email_sent": True}


# ------------------------------------------------------------ weather and preferences
def weather(ctx: ToolContext, location_or_poi_id: str, month: int, day: int, time_hour_24hformat: int,
            time_minutes: int = 0) -> dict[str, Any]:
    if not _today(ctx, month, day):
        ctx.policy_errors.append("AUT-POL:024: the weather can only be requested for the current day")
        raise ToolFailure("GET_WEATHER_001", "only today's weather can be requested")
    found = ctx.data.weather_at(location_or_poi_id)
    if found is None:
        raise ToolFailure("GET_WEATHER_002", f"no weather for {location_or_poi_id}")
    hour = int(time_hour_24hformat)
    slots = found["weather"]
    for i, slot in enumerate(slots):
        if int(slot["start_time"].split(":")[0]) <= hour < int(slot["end_time"].split(":")[0]):
            return {"current_slot": slot, "next_slot": slots[i + 1] if i + 1 < len(slots) else None}
    raise ToolFailure("GET_WEATHER_003", f"no weather slot at {hour}:00")


def preferences(ctx: ToolContext, preference_categories: dict[str, dict[str, bool]]) -> dict[str, Any]:
    prefs = ctx.fixed.user_preferences
    out: dict[str, Any] = {}
    for category, wanted in preference_categories.items():
        group = getattr(prefs, category, None)
        if group is None or not isinstance(wanted, dict):
            continue
        out[category] = {sub: list(getattr(group, sub)) for sub, asked in wanted.items()
                         if asked and sub in type(group).model_fields}
    return out


def _flags(*names: str) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "boolean"} for n in names}}


_STATION = string("The charging station's POI id.")
_PLUG = string("The plug id (plg_...).")
_SOC = {"type": "integer", "minimum": 0, "maximum": 100}

TOOLS = [
    CarTool("get_charging_specs_and_status", "read", "charging",
            "Charging: battery capacity, charging power limits, state of charge and range.", params(), charging_status),
    CarTool("get_distance_by_soc", "read", "charging", "Charging: the distance the car drives between two charge levels.",
            params({"initial_state_of_charge": {**_SOC, "description": "Charge at the start, percent."},
                    "final_state_of_charge": {**_SOC, "description": "Charge at the end, percent.", "default": 0}},
                   ("initial_state_of_charge",)), distance_by_soc),
    CarTool("calculate_charging_time_by_soc", "read", "charging",
            "Charging: how long a plug takes to charge to a level (to 80% and 100% without a target).",
            params({"charging_station_id": _STATION, "charging_station_plug_id": _PLUG,
                    "start_state_of_charge": {**_SOC, "description": "Charge now, percent."},
                    "target_state_of_charge": {**_SOC, "description": "Charge wanted, percent."}},
                   ("charging_station_id", "charging_station_plug_id", "start_state_of_charge")), time_by_soc),
    CarTool("calculate_charging_soc_by_time", "read", "charging",
            "Charging: the charge level reached after charging at a plug for some minutes.",
            params({"charging_station_id": _STATION, "charging_station_plug_id": _PLUG,
                    "start_state_of_charge": {**_SOC, "description": "Charge now, percent."},
                    "charging_time": {"type": "integer", "minimum": 0, "description": "Minutes of charging."}},
                   ("charging_station_id", "charging_station_plug_id", "start_state_of_charge", "charging_time")),
            soc_by_time),
    CarTool("get_contact_id_by_contact_name", "read", "productivity", "Contacts: find contact ids by name.",
            params({"contact_first_name": string("First name."), "contact_last_name": string("Last name.")}),
            contact_id),
    CarTool("get_contact_information", "read", "productivity", "Contacts: phone number and email of contacts.",
            params({"contact_ids": {"type": "array", "items": {"type": "string"}, "description": "Contact ids."}},
                   ("contact_ids",)), contact_information),
    CarTool("get_entries_from_calendar", "read", "productivity", "Calendar: today's meetings.",
            params({"month": {"type": "integer", "description": "Month."}, "day": {"type": "integer", "description": "Day."}},
                   ("month", "day")), calendar),
    CarTool("call_phone_by_number", "write", "productivity", "Phone: call a number (ends the conversation).",
            params({"phone_number": string("The number to call.")}, ("phone_number",)), call),
    CarTool("send_email", "write", "productivity", "Email: send a message to contacts' addresses.",
            params({"content_message": string("The message."),
                    "email_addresses": {"type": "array", "items": {"type": "string"}, "description": "Recipients."}},
                   ("content_message", "email_addresses")), send_email, confirm=True),
    CarTool("get_weather", "read", "weather", "Weather: today's forecast slot at a place and time, and the next slot.",
            params({"location_or_poi_id": string("A location or POI id."), "month": integer("Month.", 1, 12),
                    "day": integer("Day.", 1, 31), "time_hour_24hformat": integer("Hour, 0-23.", 0, 23),
                    "time_minutes": integer("Minute.", 0, 59, default=0)},
                   ("location_or_poi_id", "month", "day", "time_hour_24hformat")), weather),
    CarTool("get_user_preferences", "read", "preferences", "Preferences: the user's learned preferences, by category.",
            params({"preference_categories": {"type": "object", "description": "The categories wanted (true).",
                                              "properties": {
                                                  "points_of_interest": _flags(*POI_CATEGORIES),
                                                  "navigation_and_routing": _flags("route_selection"),
                                                  "vehicle_settings": _flags("climate_control", "vehicle_settings"),
                                                  "productivity_and_communication": _flags("email", "calendar"),
                                                  "weather": _flags("weather")}}},
                   ("preference_categories",)), preferences),
]
