"""What a driver asks the in-car assistant for, as recipes over CAR-bench's tools (``generator.py`` composes them).

A recipe gives an ``Op``: the request in the driver's words, the gold tool calls
that fulfil it (in an order CAR-bench's AUT-POL rules accept), the facts the
assistant tells, the context it needs (``config``: keys of ``context_init_config``),
and the variants a task type needs: the same request with its value left out
(``ask`` / ``answer``: the assistant must ask, disambiguation by the user), its value
held in the driver's preferences (``pref``: resolved internally), a value the car
cannot take (``decline``), and what a hallucination task can remove (``param``: a
parameter of the main tool, ``result``: a field of a read's answer).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

Action = tuple


@dataclass
class Op:
    say: str
    actions: list[Action]
    main: str  # the tool the request is about (a hallucination task removes it, or a part of it)
    info: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    groups: frozenset[str] = frozenset()
    precondition: str = "no_precondition"
    vague: str = ""  # the request without its value; the assistant asks ``ask``, the driver answers ``answer``
    ask: str = ""
    answer: str = ""
    pref: tuple[str, dict, dict, list[Action]] | None = None  # (say, preference query, preferences, actions)
    decline: tuple[str, list[Action], str] | None = None  # (say, reads, the rule that forbids it)
    param: str = ""  # "tool.parameter" a missing-parameter task removes
    result: tuple[str, str, Action, str] | None = None  # (say, "result.tool.field", the read, what is unknown)


def _zone(rng: random.Random) -> tuple[str, str]:
    return rng.choice([("DRIVER", "on my side"), ("PASSENGER", "on the passenger side"), ("ALL_ZONES", "everywhere")])


def temperature(rng: random.Random) -> Op:
    zone, where = _zone(rng)
    value = rng.choice([18, 19.5, 21, 21.5, 22, 23, 24])  # never CAR-bench's default 20: a request changes the car
    call = ("set_climate_temperature", {"temperature": value, "seat_zone": zone})
    prefs = {"vehicle_settings": {"climate_control": [f"likes the cabin at {value} degrees"]}}
    query = {"vehicle_settings": {"climate_control": True}}
    return Op(f"set the temperature {where} to {value} degrees", [call], "set_climate_temperature",
              groups=frozenset({"vehicle"}), vague=f"change the temperature {where}",
              ask="Which temperature would you like?", answer=f"{value} degrees, please.",
              pref=(f"set the temperature {where} to the temperature I like", query, prefs,
                    [("get_user_preferences", {"preference_categories": query}), call]),
              decline=(f"set the temperature {where} to 31 degrees", [("get_climate_settings", {})],
                       "the cabin temperature can only be set between 16 and 28 degrees"),
              param="set_climate_temperature.seat_zone",
              result=("tell me the fan level", "result.get_climate_settings.fan_speed", ("get_climate_settings", {}),
                      "the current fan level"))


def seat_heating(rng: random.Random) -> Op:
    level = rng.choice([1, 2, 3])
    gated = rng.random() < 0.5
    zone, where = ("PASSENGER", "for my passenger") if gated else ("DRIVER", "on my seat")
    call = ("set_seat_heating", {"level": level, "seat_zone": zone})
    config = {"seats_occupied": {"driver": True, "passenger": True, "driver_rear": False, "passenger_rear": False}}
    reads = [("get_seats_occupancy", {})] if gated else []
    query = {"vehicle_settings": {"vehicle_settings": True}}
    prefs = {"vehicle_settings": {"vehicle_settings": [f"likes seat heating at level {level}"]}}
    return Op(f"turn the seat heating {where} to level {level}", [*reads, call], "set_seat_heating",
              config=config, groups=frozenset({"vehicle"}),
              precondition="occupancy_or_context_gated" if gated else "no_precondition",
              vague=f"turn on the seat heating {where}", ask="Which heating level would you like, 1 to 3?",
              answer=f"Level {level}, please.",
              pref=(f"turn on the seat heating {where} the way I like it", query, prefs,
                    [*reads, ("get_user_preferences", {"preference_categories": query}), call]),
              decline=(f"turn the seat heating {where} to level 5", [("get_seat_heating_level", {})],
                       "the seat heating only has levels 0 to 3"),
              param="set_seat_heating.seat_zone")


def air_conditioning(rng: random.Random) -> Op:
    """AUT-POL 011: the AC goes on with the windows at most 20% open and the fan running, after a look."""
    opened = rng.choice([40, 60, 80])
    config = {"window_driver_position": opened, "fan_speed": 0}
    calls = [("get_climate_settings", {}), ("get_vehicle_window_positions", {}),
             ("open_close_window", {"window": "ALL", "percentage": 0}), ("set_fan_speed", {"level": 1}),
             ("set_air_conditioning", {"on": True})]
    return Op("switch on the air conditioning", calls, "set_air_conditioning", config=config,
              groups=frozenset({"vehicle"}), precondition="policy_guarded",
              result=("tell me the fan level", "result.get_climate_settings.fan_speed", ("get_climate_settings", {}),
                      "the current fan level"))


def window(rng: random.Random) -> Op:
    which, said = rng.choice([("DRIVER", "my window"), ("PASSENGER", "the passenger window"), ("ALL", "all windows")])
    value = rng.choice([10, 20, 30, 50, 100])
    call = ("open_close_window", {"window": which, "percentage": value})
    query = {"vehicle_settings": {"vehicle_settings": True}}
    prefs = {"vehicle_settings": {"vehicle_settings": [f"opens windows to {value} percent"]}}
    return Op(f"open {said} to {value} percent", [call], "open_close_window", groups=frozenset({"vehicle"}),
              vague=f"open {said} a bit", ask="How far should I open it, in percent?", answer=f"{value} percent.",
              pref=(f"open {said} the way I usually have it", query, prefs,
                    [("get_user_preferences", {"preference_categories": query}), call]),
              decline=(f"open {said} to 150 percent", [("get_vehicle_window_positions", {})],
                       "a window opens at most 100 percent"),
              param="open_close_window.window")


def sunroof(rng: random.Random, weather: Action) -> Op:
    """AUT-POL 009 and 005: the weather first, the sunshade open before the sunroof."""
    value = rng.choice([30, 50, 100])
    calls = [weather, ("open_close_sunshade", {"percentage": 100}), ("open_close_sunroof", {"percentage": value})]
    return Op(f"open the sunroof to {value} percent", calls, "open_close_sunroof",
              groups=frozenset({"vehicle", "weather"}), precondition="ordering_dependency",
              vague="open the sunroof", ask="How far should I open the sunroof, in percent?",
              answer=f"{value} percent, please.", param="open_close_sunroof.percentage",
              result=("tell me what the weather is like right now", "result.get_weather.current_slot.condition",
                      weather, "the current weather condition"))


def ambient(rng: random.Random) -> Op:
    color = rng.choice(["RED", "GREEN", "BLUE", "PURPLE", "CYAN", "ORANGE"])
    call = ("set_ambient_lights", {"on": True, "lightcolor": color})
    query = {"vehicle_settings": {"vehicle_settings": True}}
    prefs = {"vehicle_settings": {"vehicle_settings": [f"likes the ambient light in {color.lower()}"]}}
    return Op(f"switch the ambient light on in {color.lower()}", [call], "set_ambient_lights",
              groups=frozenset({"vehicle"}), vague="switch the ambient light on",
              ask="Which color would you like?", answer=f"{color.capitalize()}, please.",
              pref=("switch the ambient light on in my favourite color", query, prefs,
                    [("get_user_preferences", {"preference_categories": query}), call]),
              param="set_ambient_lights.lightcolor")


def fog_lights(rng: random.Random) -> Op:
    """AUT-POL 013: the fog lights on with the low beams on and the high beams off, after a look."""
    calls = [("get_exterior_lights_status", {}), ("set_head_lights_low_beams", {"on": True}),
             ("set_fog_lights", {"on": True})]
    return Op("switch on the fog lights", calls, "set_fog_lights", groups=frozenset({"vehicle"}),
              precondition="policy_guarded")


def trunk(rng: random.Random) -> Op:
    return Op("open the trunk", [("open_close_trunk_door", {"action": "OPEN"})], "open_close_trunk_door",
              groups=frozenset({"vehicle"}))


def navigation(rng: random.Random, here: str, places: list[dict], routes: Callable[[str, str], list[dict]]) -> Op:
    options = [(p, r) for p in places if p["id"] != here and (r := routes(here, p["id"]))]
    place, found = rng.choice(options)
    pick = rng.randrange(len(found))
    route = found[pick]
    calls = [("get_location_id_by_location_name", {"location": place["name"]}),
             ("get_routes_from_start_to_destination", {"start_id": here, "destination_id": place["id"]}),
             ("set_new_navigation", {"route_ids": [route["route_id"]]})]
    choice = f"route {pick + 1}, via {route['name_via']}"
    query = {"navigation_and_routing": {"route_selection": True}}
    prefs = {"navigation_and_routing": {"route_selection": [f"takes the {choice.split(', ')[1]} route when offered"]}}
    return Op(f"start the navigation to {place['name']}, taking the route via {route['name_via']}", calls,
              "set_new_navigation", groups=frozenset({"navigation"}), precondition="ordering_dependency",
              vague=f"start the navigation to {place['name']}", ask="There are several routes. Which one would you like?",
              answer=f"The one via {route['name_via']}, please.",
              pref=(f"start the navigation to {place['name']} on my usual route", query, prefs,
                    [*calls[:2], ("get_user_preferences", {"preference_categories": query}), calls[2]]),
              decline=(f"start the navigation to {place['name']} on the route via the old mountain pass", calls[:2],
                       f"there is no route to {place['name']} via a mountain pass"),
              param="set_new_navigation.route_ids",
              result=(f"tell me how far it is to {place['name']}",
                      "result.get_routes_from_start_to_destination.routes.distance_km", calls[1],
                      "the distance of the routes"))


def call_contact(rng: random.Random, contacts: list[dict], email: bool) -> Op:
    person = rng.choice(contacts)
    first, last = person["name"]["first_name"], person["name"]["last_name"]
    look = [("get_contact_id_by_contact_name", {"contact_first_name": first, "contact_last_name": last}),
            ("get_contact_information", {"contact_ids": [person["id"]]})]
    if email:
        write = ("send_email", {"content_message": "I am running about 15 minutes late.",
                                "email_addresses": [person["email"]]})
        say, tool = f"email {first} {last} that I am running about 15 minutes late", "send_email"
    else:
        write = ("call_phone_by_number", {"phone_number": person["phone_number"]})
        say, tool = f"call {first} {last}", "call_phone_by_number"
    kind = "email" if email else "calendar"
    query = {"productivity_and_communication": {kind: True}}
    said = f"my colleague {first}"
    prefs = {"productivity_and_communication": {kind: [
        f"'{said}' is {first} {last}, {person['email'] if email else person['phone_number']}"]}}
    return Op(say, [*look, write], tool, groups=frozenset({"communication"}), precondition="ordering_dependency",
              vague=say.replace(f" {last}", ""), ask=f"Which {first} do you mean? Please tell me the last name.",
              answer=f"{first} {last}.", param=f"{tool}.{'email_addresses' if email else 'phone_number'}",
              pref=(say.replace(f"{first} {last}", said), query, prefs,
                    [("get_user_preferences", {"preference_categories": query}), write]),
              decline=(f"tell me what is in my calendar next month, then {say}", [],
                       "I can only read the calendar for today"),
              result=(f"tell me {first} {last}'s phone number", f"result.get_contact_information.{person['id']}."
                      "phone_number", look[1], f"{first}'s phone number"))


def charging(rng: random.Random, soc: int) -> Op:
    final = rng.choice([10, 15, 20])
    calls = [("get_charging_specs_and_status", {}),
             ("get_distance_by_soc", {"initial_state_of_charge": soc, "final_state_of_charge": final})]
    query = {"points_of_interest": {"charging_stations": True}}
    prefs = {"points_of_interest": {"charging_stations": [f"never lets the battery go below {final} percent"]}}
    return Op(f"tell me how far I can drive before the battery is down to {final} percent", calls,
              "get_distance_by_soc", info=[f"{final}"], groups=frozenset({"charging"}),
              precondition="occupancy_or_context_gated",
              vague="tell me how far I can still drive", ask="Down to which charge level, in percent?",
              answer=f"Down to {final} percent.",
              pref=("tell me how far I can drive before the battery reaches my usual minimum", query, prefs,
                    [calls[0], ("get_user_preferences", {"preference_categories": query}), calls[1]]),
              decline=("tell me how far I can drive until the battery is at 150 percent", calls[:1],
                       "the state of charge only goes from 0 to 100 percent"),
              param="get_distance_by_soc.final_state_of_charge",
              result=("tell me the battery's state of charge", "result.get_charging_specs_and_status.state_of_charge",
                      ("get_charging_specs_and_status", {}), "the state of charge"))


def weather_info(rng: random.Random, weather: Callable[[str], Action], places: list[dict]) -> Op:
    place = rng.choice(places)
    call = weather(place["id"])
    query = {"weather": {"weather": True}}
    prefs = {"weather": {"weather": [f"means the weather in {place['name']} when asking about the weather"]}}
    return Op(f"tell me the weather in {place['name']} right now", [call], "get_weather", info=[place["name"]],
              groups=frozenset({"weather"}), vague="tell me the weather right now",
              ask="For which place would you like the weather?", answer=f"For {place['name']}.",
              pref=("tell me the weather where I usually mean", query, prefs,
                    [("get_user_preferences", {"preference_categories": query}), call]),
              decline=(f"tell me the weather in {place['name']} next week", [],
                       "I can only look up the weather for today"),
              param="get_weather.location_or_poi_id",
              result=("tell me whether it is sunny right now", "result.get_weather.current_slot.condition", call,
                      "the current weather condition"))
