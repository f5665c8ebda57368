"""The EvoSyn side of the CAR-bench agreement sets (run with the project's venv, from the repository root).

    python tests/envs/car_bench/data/build_agreement.py trajectories > ours.jsonl      # gold and perturbed
    python tests/envs/car_bench/data/build_agreement.py calls 150 1 > calls.jsonl      # random call sequences
    python tests/envs/car_bench/data/build_agreement.py plans 60 2 > plans.jsonl       # the planner among them
    # ... score both with CAR-bench's own code, outside the project (carbench_score.py) ...
    python tests/envs/car_bench/data/build_agreement.py rewards theirs.jsonl > agreement.jsonl
    python tests/envs/car_bench/data/build_agreement.py tools tools_theirs.jsonl > tool_agreement.jsonl

The last two keep our messages and calls, and of CAR-bench's answers only the reward, its components, the codes of
the rules and tool errors it reported, and per call the answer's kind, our digest of its state and its counts (and,
for the planner, the SHA-256 of its successful answer's result, as canonical JSON: what the agent reads).
"""
from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

PLACES = ["loc_mun_9995", "loc_aug_1002", "loc_stu_1003", "loc_ulm_1004", "loc_nur_1005", "poi_cha_4101",
          "poi_res_4001", "poi_cha_4003", "poi_res_4102", "loc_xyz_0001", "bad"]
ROUTES = ["rll_mun_aug_2001", "rll_mun_aug_2002", "rll_mun_stu_2003", "rll_mun_stu_2004", "rll_mun_ulm_2006",
          "rll_aug_stu_2009", "rlp_mun_cha_3001", "rpl_cha_stu_3101", "rlp_mun_res_3003", "rll_xxx_yyy_0000"]
WINDOWS = ["ALL", "DRIVER", "PASSENGER", "DRIVER_REAR", "PASSENGER_REAR", "RIGHT_REAR", "LEFT_REAR", "ROOF"]
AIRFLOW = ["FEET", "HEAD", "HEAD_FEET", "WINDSHIELD", "WINDSHIELD_FEET", "WINDSHIELD_HEAD", "WINDSHIELD_HEAD_FEET"]


def arguments(name: str, rng: random.Random) -> dict:
    pick = rng.choice
    pct = pick([0, 10, 25, 50, 100, 120])
    table = {
        "open_close_sunroof": {"percentage": pct}, "open_close_sunshade": {"percentage": pct},
        "open_close_trunk_door": {"action": pick(["OPEN", "CLOSE", "HALF"])},
        "open_close_window": {"window": pick(WINDOWS), "percentage": pct},
        "set_air_circulation": {"mode": pick(["FRESH_AIR", "RECIRCULATION", "AUTO", "MAX"])},
        "set_air_conditioning": {"on": pick([True, False])},
        "set_ambient_lights": {"on": pick([True, False]), "lightcolor": pick(["RED", "BLUE", "NONE", "GOLD"])},
        "set_climate_temperature": {"temperature": pick([16, 19.5, 22, 28, 30, 21.3]),
                                    "seat_zone": pick(["ALL_ZONES", "DRIVER", "PASSENGER", "REAR"])},
        "set_fan_airflow_direction": {"direction": pick([*AIRFLOW, "UP"])},
        "set_fan_speed": {"level": pick([0, 1, 2, 5, 6])},
        "set_fog_lights": {"on": pick([True, False])}, "set_head_lights_high_beams": {"on": pick([True, False])},
        "set_head_lights_low_beams": {"on": pick([True, False])},
        "set_reading_light": {"position": pick(WINDOWS), "on": pick([True, False])},
        "set_seat_heating": {"level": pick([0, 2, 3, 4]), "seat_zone": pick(["ALL_ZONES", "DRIVER", "PASSENGER", "X"])},
        "set_steering_wheel_heating": {"level": pick([0, 1, 3, 4])},
        "set_window_defrost": {"on": pick([True, False]), "defrost_window": pick(["ALL", "FRONT", "REAR", "SIDE"])},
        "set_new_navigation": {"route_ids": pick([["rll_mun_aug_2001"], ["rll_mun_stu_2003"], ["rll_aug_stu_2009"],
                                                  ["rlp_mun_cha_3001", "rpl_cha_stu_3101"],
                                                  ["rll_mun_aug_2001", "rll_aug_stu_2009"]])},
        "navigation_add_one_waypoint": pick([
            {"waypoint_id_to_add": "poi_cha_4101", "waypoint_id_before_new_waypoint": "loc_mun_9995",
             "waypoint_id_after_new_waypoint": "loc_stu_1003", "route_id_leading_to_new_waypoint": "rlp_mun_cha_3001",
             "route_id_leading_away_from_new_waypoint": "rpl_cha_stu_3101"},
            {"waypoint_id_to_add": "loc_stu_1003", "waypoint_id_before_new_waypoint": "loc_aug_1002",
             "route_id_leading_to_new_waypoint": "rll_aug_stu_2009"}]),
        "navigation_delete_destination": {"destination_id_to_delete": pick(["loc_stu_1003", "loc_aug_1002"])},
        "navigation_delete_waypoint": pick([
            {"waypoint_id_to_delete": "poi_cha_4101", "route_id_without_waypoint": "rll_mun_stu_2003"},
            {"waypoint_id_to_delete": "loc_aug_1002", "route_id_without_waypoint": "rll_mun_stu_2003"}]),
        "navigation_replace_final_destination": pick([
            {"new_destination_id": "loc_ulm_1004", "route_id_leading_to_new_destination": "rll_mun_ulm_2006"},
            {"new_destination_id": "loc_stu_1003", "route_id_leading_to_new_destination": "rll_aug_stu_2009"}]),
        "navigation_replace_one_waypoint": {"waypoint_id_to_replace": "poi_cha_4101", "new_waypoint_id": "poi_res_4102",
                                            "route_id_leading_to_new_waypoint": "rlp_mun_res_3002",
                                            "route_id_leading_away_from_new_waypoint": "rpl_res_stu_3102"},
        "delete_current_navigation": {},
        "call_phone_by_number": {"phone_number": "+49 151 2200101"},
        "send_email": {"content_message": "hi", "email_addresses": pick([["lena.hofmann@example.org"],
                                                                         ["nobody@example.org"]])},
        "get_weather": {"location_or_poi_id": pick(PLACES[:8]), "month": 3, "day": pick([10, 11]),
                        "time_hour_24hformat": pick([7, 10, 14, 22])},
        "get_location_id_by_location_name": {"location": pick(["Munich", "Stutgart", "Ulmm", "Paris", "augsburg"])},
        "get_routes_from_start_to_destination": {"start_id": pick(PLACES), "destination_id": pick(PLACES)},
        "search_poi_at_location": {"location_id": pick(PLACES[:5]), "category_poi": pick(
            ["restaurants", "charging_stations", "parking"]), **pick([{}, {"filters": ["any::currently_open"]},
                                                                      {"filters": ["charging_stations::has_dc_plug"]}])},
        "search_poi_along_the_route": {"route_id": pick(ROUTES[:6]), "category_poi": pick(["restaurants",
                                                                                           "charging_stations"]),
                                       **pick([{}, {"at_kilometer": 100}, {"at_kilometer": 150,
                                                                           "filters": ["any::sort_by_distance"]}])},
        "get_current_navigation_state": pick([{}, {"detailed_information": True}]),
        "convert_route_distance_and_time": {"route_id": pick(ROUTES[:6]), **pick([{"time_minutes": 30},
                                                                                 {"distance_km": 50},
                                                                                 {"distance_km": 900}])},
        "get_contact_id_by_contact_name": pick([{"contact_first_name": "Lea"}, {"contact_last_name": "Hofman"},
                                                {"contact_first_name": "Tobias", "contact_last_name": "Wagner"},
                                                {"contact_first_name": "Zed"}]),
        "get_contact_information": {"contact_ids": pick([["con_7001"], ["con_7002", "con_7009"]])},
        "get_entries_from_calendar": {"month": 3, "day": pick([10, 12])},
        "get_distance_by_soc": {"initial_state_of_charge": pick([80, 20]), "final_state_of_charge": pick([10, 40])},
        "calculate_charging_time_by_soc": {"charging_station_id": "poi_cha_4101",
                                           "charging_station_plug_id": pick(["plg_gue_5001", "plg_gue_5003"]),
                                           "start_state_of_charge": pick([10, 50]),
                                           **pick([{}, {"target_state_of_charge": 90}])},
        "calculate_charging_soc_by_time": {"charging_station_id": "poi_cha_4003",
                                           "charging_station_plug_id": pick(["plg_isr_5001", "plg_isr_5002"]),
                                           "start_state_of_charge": 20, "charging_time": pick([15, 45])},
        "get_user_preferences": {"preference_categories": {"points_of_interest": {"restaurants": True},
                                                           "vehicle_settings": {"climate_control": True}}},
        "calculate_math": {"expression": pick(["(1+2)*3", "10/4", "2**8"])},
    }
    return table.get(name, {})


PLAN_STEPS = [  # valid, and each way CAR-bench's planner can refuse a step list
    [{"step_description": "find a charger", "step_dependent_on": []},
     {"step_description": "route there", "step_dependent_on": [0]},
     {"step_description": "tell the driver", "step_dependent_on": [0, 1]}],
    [{"step_description": "open the window", "step_dependent_on": []},
     {"step_description": "check the weather", "step_dependent_on": []}],
    [{"step_description": "find a charger", "step_dependent_on": []},
     {"step_description": "call Lena", "step_dependent_on": []}],
    [{"step_description": "a", "step_dependent_on": [1]}, {"step_description": "b", "step_dependent_on": []}],
    [{"step_description": "a", "step_dependent_on": ["0"]}],
    [{"step_description": "a"}],
    [{"step_dependent_on": []}],
    [{"step_description": 7, "step_dependent_on": []}],
    ["just text"],
    [],
]
STEP_UPDATES = [
    [{"step_index": 0, "step_status": "completed"}],
    [{"step_index": 0, "step_status": "completed", "step_notes": "found one"},
     {"step_index": 1, "step_status": "in_progress"}],
    [{"step_index": 1, "step_status": "completed"}, {"step_index": 2, "step_status": "blocked"}],
    [{"step_index": 0, "step_notes": "only a note"}],
    [{"step_index": 5, "step_status": "completed"}],
    [{"step_index": 0, "step_status": "done"}],
    [{"step_status": "completed"}],
    [{"step_index": "0", "step_status": "completed"}],
    [],
]


def planner_arguments(rng: random.Random) -> dict:
    """A planning_tool call: each command, with and without ``plan_id`` (CAR-bench falls back to the active plan
    for ``get`` and ``mark_steps``), with valid and refused steps and updates."""
    pick = rng.choice
    command = pick(["create", "create", "create", "update", "list", "get", "get", "set_active", "mark_steps",
                    "mark_steps", "mark_steps", "delete", "archive"])
    out: dict = {"command": command}
    plan_id = pick(["trip", "trip", "errands", None, None, ""])
    if plan_id is not None:
        out["plan_id"] = plan_id
    if command in ("create", "update"):
        title = pick(["Charge and go", "Errands", "Charge and go", "Errands", "", None])
        if title is not None:
            out["title"] = title
        steps = pick([*PLAN_STEPS[:3] * 4, *PLAN_STEPS, None])
        if steps is not None:
            out["steps"] = steps
    if command == "mark_steps":
        updates = pick([*STEP_UPDATES[:4] * 3, *STEP_UPDATES, None])
        if updates is not None:
            out["step_updates"] = updates
    return out


def plan_sequences(n: int, seed: int) -> list[dict]:
    """Call sequences mostly of the planner, with other tools between its calls."""
    from evosyn.envs.car_bench.domain import CarBenchDomain
    from evosyn.envs.car_bench.tools import TOOLS

    dom = CarBenchDomain()
    tasks = [t for t in dom.tasks() if t.family == "base"]
    names = sorted(n for n in TOOLS if n not in ("think", "planning_tool", "calculate_datetime"))
    rng = random.Random(seed)
    out = []
    for i in range(n):
        calls = [{"name": "planning_tool", "arguments": {"command": "create", "plan_id": rng.choice(["trip", "errands"]),
                                                         "title": "Charge and go", "steps": rng.choice(PLAN_STEPS[:3])}}]
        for _ in range(7):
            if rng.random() < 0.75:
                calls.append({"name": "planning_tool", "arguments": planner_arguments(rng)})
            else:
                name = rng.choice(names)
                calls.append({"name": name, "arguments": arguments(name, rng)})
        out.append({"id": f"plan_{i}", "task_id": rng.choice(tasks).id, "calls": calls})
    return out


def sequences(n: int, seed: int) -> list[dict]:
    from evosyn.envs.car_bench.domain import CarBenchDomain
    from evosyn.envs.car_bench.tools import TOOLS

    dom = CarBenchDomain()
    tasks = [t for t in dom.tasks() if t.family == "base"]
    names = sorted(n for n in TOOLS if n not in ("think", "planning_tool", "calculate_datetime"))
    rng = random.Random(seed)
    out = []
    for i in range(n):
        task = rng.choice(tasks)
        calls = [{"name": name, "arguments": arguments(name, rng)} for name in rng.sample(names, 6)]
        out.append({"id": f"seq_{i}", "task_id": task.id, "calls": calls})
    return out


def trajectories() -> None:
    from evosyn.envs.car_bench.domain import CarBenchDomain
    from evosyn.envs.car_bench.perturb import trajectories as all_trajectories

    for task, kind, messages in all_trajectories(CarBenchDomain()):
        print(json.dumps({"task_id": task.id, "kind": kind, "task": task.to_row(),
                          "messages": [m.model_dump(mode="json") for m in messages]}))


def rewards(path: str) -> None:
    keep = ("reward", "r_actions_final", "r_actions_intermediate", "r_tool_subset", "r_tool_execution", "r_policy",
            "r_user_end_conversation")
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        theirs = row["carbench"]
        out = {k: theirs[k] for k in keep}
        out["policy_codes"] = [re.match(r"(?:TECH-)?AUT-POL:\d+", e).group(0) for e in theirs["policy_aut_errors"]]
        out["tool_error_codes"] = [e.split(":")[0] for e in theirs["tool_execution_errors"]]
        print(json.dumps({"task_id": row["task_id"], "kind": row["kind"], "messages": row["messages"],
                          "carbench": out}))


def tools(path: str) -> None:
    from evosyn.envs.car_bench.state import CarState

    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        steps = [{"kind": s["kind"], "state": CarState.model_validate(s["state"]).digest(),
                  "policy_errors": s["policy_errors"], "tool_errors": s["tool_errors"],
                  **({"result": s["result"]} if "result" in s else {})} for s in row["carbench"]]
        print(json.dumps({"id": row["id"], "task_id": row["task_id"], "calls": row["calls"], "carbench": steps}))


if __name__ == "__main__":
    sys.path.insert(0, ".")
    command, args = sys.argv[1], sys.argv[2:]
    if command == "calls":
        for row in sequences(int(args[0]), int(args[1])):
            print(json.dumps(row))
    elif command == "plans":
        for row in plan_sequences(int(args[0]), int(args[1])):
            print(json.dumps(row))
    elif command == "trajectories":
        trajectories()
    elif command == "rewards":
        rewards(args[0])
    elif command == "tools":
        tools(args[0])
    else:
        raise SystemExit(f"unknown command {command!r}: calls, plans, trajectories, rewards or tools")
