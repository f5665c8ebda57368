from tests.envs.car_bench.conftest import call

NAV = {"navigation_active": True, "waypoints_id": ["loc_mun_9995", "loc_stu_1003"],
       "routes_to_final_destination_id": ["rll_mun_stu_2003"]}
TODAY = {"month": 3, "day": 10}


def test_vehicle_setters_change_the_state_and_answer_in_the_envelope(car):
    ep = car.episode(car.official_task("base_f1"))
    assert call(ep, "open_close_window", window="ALL", percentage=30) == (
        {"status": "SUCCESS", "result": {"window": "ALL", "percentage": 30}}, False)
    assert ep.state.window_passenger_rear_position == 30
    call(ep, "open_close_window", window="LEFT_REAR", percentage=0)
    assert ep.state.window_passenger_rear_position == 0 and ep.state.window_driver_rear_position == 30
    call(ep, "set_ambient_lights", on=True, lightcolor="NONE")
    assert ep.state.ambient_light == "OFF"
    call(ep, "open_close_trunk_door", action="OPEN")
    assert ep.state.trunk_door_position == "OPEN"  # CAR-bench stores the action itself
    answer, error = call(ep, "get_climate_settings")
    assert not error and answer["result"]["fan_airflow_direction"] == "HEAD"


def test_a_refused_call_is_a_tool_error_and_a_rejected_value_is_not(car):
    ep = car.episode()
    answer, error = call(ep, "set_fan_speed", level=7)
    assert error and answer["status"] == "FAILURE" and "SET_FAN_SPEED_001" in answer["errors"]
    answer, error = call(ep, "set_climate_temperature", temperature=31, seat_zone="DRIVER")
    assert error and answer.startswith("Error:") and ep.state.climate_temperature_driver == 20
    answer, error = call(ep, "set_seat_heating", level=2)  # a missing argument
    assert error and answer.startswith("Error:")
    for name, arguments in (("get_user_preferences", {"preference_categories": ["weather"]}),
                            ("open_close_sunroof", {"percentage": "half"})):
        answer, error = call(ep, name, **arguments)  # wrong types: an answer, never an exception
        assert error and answer.startswith("Error:")
    assert len(ep.tool_errors) == 1  # only the refusal counts, as in CAR-bench
    assert ep.step("fly", {}).content == "Unknown action fly"


def test_navigation_is_set_edited_and_deleted(car):
    ep = car.episode()
    answer, _ = call(ep, "set_new_navigation", route_ids=["rll_mun_aug_2001"])
    assert answer["result"]["waypoints"] == ["loc_mun_9995", "loc_aug_1002"] and ep.state.navigation_active
    answer, error = call(ep, "set_new_navigation", route_ids=["rll_mun_ulm_2006"])
    assert error and any("AUT-POL:018" in e for e in ep.policy_errors)
    call(ep, "navigation_replace_final_destination", new_destination_id="loc_ulm_1004",
         route_id_leading_to_new_destination="rll_mun_ulm_2006")
    assert ep.state.waypoints_id == ["loc_mun_9995", "loc_ulm_1004"]
    answer, error = call(ep, "navigation_delete_destination", destination_id_to_delete="loc_ulm_1004")
    assert error and any("AUT-POL:019" in e for e in ep.policy_errors)
    call(ep, "delete_current_navigation")
    assert ep.state.waypoints_id == [] and not ep.state.navigation_active
    _, error = call(ep, "navigation_delete_waypoint", waypoint_id_to_delete="loc_aug_1002",
                    route_id_without_waypoint="rll_mun_aug_2001")
    assert error and any("AUT-POL:017" in e for e in ep.policy_errors)


def test_a_stop_is_added_and_removed_again(car):
    ep = car.episode(NAV)
    found, _ = call(ep, "search_poi_along_the_route", route_id="rll_mun_stu_2003", category_poi="charging_stations",
                    at_kilometer=100)
    stop = found["result"]["pois_found_along_route"][0]
    assert stop["id"] == "poi_cha_4101" and stop["detour_from_route_km"]["detour"] == 2.2
    _, error = call(ep, "search_poi_along_the_route", route_id="rll_mun_stu_2003", category_poi="charging_stations")
    assert error  # charging searches need at_kilometer
    call(ep, "navigation_add_one_waypoint", waypoint_id_to_add="poi_cha_4101",
         waypoint_id_before_new_waypoint="loc_mun_9995", waypoint_id_after_new_waypoint="loc_stu_1003",
         route_id_leading_to_new_waypoint="rlp_mun_cha_3001",
         route_id_leading_away_from_new_waypoint="rpl_cha_stu_3101")
    assert ep.state.waypoints_id == ["loc_mun_9995", "poi_cha_4101", "loc_stu_1003"]
    assert ep.state.routes_to_final_destination_id == ["rlp_mun_cha_3001", "rpl_cha_stu_3101"]
    call(ep, "navigation_delete_waypoint", waypoint_id_to_delete="poi_cha_4101",
         route_id_without_waypoint="rll_mun_stu_2003")
    assert ep.state.waypoints_id == NAV["waypoints_id"] and not ep.policy_errors and len(ep.tool_errors) == 1
    detail, _ = call(ep, "get_current_navigation_state", detailed_information=True)
    assert detail["result"]["details"]["routes"][0]["distance_km"] == 232.0


def test_a_route_not_from_the_current_location_breaks_the_start_rule(car):
    ep = car.episode()
    call(ep, "set_new_navigation", route_ids=["rll_aug_stu_2009"])
    assert any("AUT-POL:016" in e for e in ep.policy_errors)


def test_lookups_by_name_tolerate_small_typos(car):
    ep = car.episode()
    assert call(ep, "get_location_id_by_location_name", location="Stutgart")[0]["result"] == {"id": "loc_stu_1003"}
    assert call(ep, "get_location_id_by_location_name", location="Paris")[1]
    near, _ = call(ep, "get_contact_id_by_contact_name", contact_first_name="Lea", contact_last_name="Hofmann")
    assert set(near["result"]["matches"]) == {"con_7001", "con_7005"}  # both within one edit: ask the user
    one, _ = call(ep, "get_contact_id_by_contact_name", contact_last_name="Wagner")
    assert one["result"]["matches"] == {"con_7004": "tobias wagner"}


def test_weather_and_calendar_only_for_today(car):
    ep = car.episode(car.official_task("base_f9"))
    slot, _ = call(ep, "get_weather", location_or_poi_id="poi_res_4001", time_hour_24hformat=7, **TODAY)
    assert slot["result"]["current_slot"]["condition"] == "cloudy_and_fog"  # the POI's city
    assert slot["result"]["next_slot"]["start_time"] == "09:00"
    meetings, _ = call(ep, "get_entries_from_calendar", **TODAY)
    assert meetings["result"]["meetings"][0]["attendees"] == ["con_7004"]
    _, error = call(ep, "get_weather", location_or_poi_id="loc_mun_9995", month=3, day=11, time_hour_24hformat=9)
    _, error2 = call(ep, "get_entries_from_calendar", month=4, day=10)
    assert error and error2 and [e[:11] for e in ep.policy_errors] == ["AUT-POL:024", "AUT-POL:023"]


def test_email_and_calls_are_remembered(car):
    ep = car.episode()
    call(ep, "call_phone_by_number", phone_number="+49 151 2200104")
    _, error = call(ep, "send_email", content_message="hi", email_addresses=["jonas.becker@example.org", "x@y.z"])
    assert error and ep.state.email_addresses_sent_mail_to == ["jonas.becker@example.org"]
    assert ep.state.phone_numbers_called == ["+49 151 2200104"]


def test_charging_numbers_follow_the_curve(car):
    ep = car.episode(car.official_task("base_f10"))
    status, _ = call(ep, "get_charging_specs_and_status")
    assert status["result"]["remaining_range"] == "166.0km"  # 35% of 76 kWh at 16 kWh / 100 km
    times, _ = call(ep, "calculate_charging_time_by_soc", charging_station_id="poi_cha_4003",
                    charging_station_plug_id="plg_isr_5001", start_state_of_charge=35)
    ac, _ = call(ep, "calculate_charging_time_by_soc", charging_station_id="poi_cha_4004",
                 charging_station_plug_id="plg_mar_5001", start_state_of_charge=35)
    fast, slow = (int(t["result"]["time_from_35_until_80_percent_soc"][:-3]) for t in (times, ac))
    assert 0 < fast < slow  # 150 kW DC against 11 kW AC
    soc, _ = call(ep, "calculate_charging_soc_by_time", charging_station_id="poi_cha_4003",
                  charging_station_plug_id="plg_isr_5001", start_state_of_charge=35, charging_time=fast)
    assert soc["result"][f"soc_in_percent_after_charging_for_{fast}min"] == "80.0 percent"  # rounded; 79 + a bit
    _, error = call(ep, "calculate_charging_soc_by_time", charging_station_id="poi_cha_4003",
                    charging_station_plug_id="plg_xxx_9999", start_state_of_charge=35, charging_time=10)
    assert error


def test_cross_domain_tools(car):
    ep = car.episode()
    assert ep.step("calculate_math", {"expression": "(232 - 104) / 3"}).content == "42.67"
    assert ep.step("calculate_math", {"expression": "__import__('os')"}).error
    moved = ep.step("calculate_datetime", {"original_datetime": {"year": 2025, "month": 3, "day": 10, "hour": 22,
                                                                  "minute": 50},
                                           "times_to_add": [{"hours": 1, "minutes": 20}]})
    assert moved.content == '{"year": 2025, "month": 3, "day": 11, "hour": 0, "minute": 10}'
    assert ep.step("think", {"thought": "hm"}).content == ""
    created, _ = call(ep, "planning_tool", command="create", plan_id="p", title="t",
                      steps=[{"step_description": "a", "step_dependent_on": []},
                             {"step_description": "b", "step_dependent_on": [0]}])
    steps = created["result"]["plan_details"]["steps"]
    assert [s["status"] for s in steps] == ["executable_but_not_started", "unresolved_dependencies_and_not_started"]
    marked, _ = call(ep, "planning_tool", command="mark_steps", plan_id="p",
                     step_updates=[{"step_index": 0, "step_status": "completed"}])
    steps = marked["result"]["plan_details"]["steps"]
    assert [s["status"] for s in steps] == ["completed", "executable_but_not_started"]  # b's dependency is done
    assert ep.state_digest() == car.episode().state_digest()  # none of them changes the car


def test_the_planner_without_a_plan_id_uses_the_active_plan_and_its_refusals_are_no_tool_errors(car):
    """As CAR-bench's planner: ``get`` and ``mark_steps`` without ``plan_id`` act on the active plan (the one
    created or set last); the commands that need one refuse; and no refusal of the planner is a tool execution
    error (CAR-bench's reward never counts them)."""
    ep = car.episode()
    answer, error = call(ep, "planning_tool", command="get")
    assert error and answer["status"] == "FAILURE"  # no plan yet: nothing to fall back to
    for plan_id in ("trip", "errands"):
        call(ep, "planning_tool", command="create", plan_id=plan_id, title=plan_id,
             steps=[{"step_description": "look", "step_dependent_on": []}])
    answer, error = call(ep, "planning_tool", command="get")
    assert not error and answer["result"]["plan_id"] == "errands" and answer["result"]["is_active"]
    call(ep, "planning_tool", command="set_active", plan_id="trip")
    answer, error = call(ep, "planning_tool", command="mark_steps",
                         step_updates=[{"step_index": 0, "step_status": "completed"}])
    assert not error and answer["result"]["plan_id"] == "trip"
    assert answer["result"]["plan_details"]["progress"]["completed"] == 1
    for arguments in ({"command": "delete"}, {"command": "set_active"}, {"command": "update", "title": "x"},
                      {"command": "create", "plan_id": "trip", "title": "again",
                       "steps": [{"step_description": "look", "step_dependent_on": []}]},
                      {"command": "mark_steps", "step_updates": [{"step_index": 3}]}, {"command": "archive"}):
        answer, error = call(ep, "planning_tool", **arguments)
        assert error and answer["status"] == "FAILURE", arguments
    assert ep.tool_errors == []


def test_preferences_and_removed_results(car):
    ep = car.episode(car.official_task("disambiguation_f0"))
    prefs, _ = call(ep, "get_user_preferences", preference_categories={"vehicle_settings": {"climate_control": True}})
    assert prefs["result"] == {"vehicle_settings": {"climate_control": [
        "prefers 21.5 degrees Celsius when no value is given"]}}
    ep = car.episode(car.official_task("hallucination_f2"))
    settings, _ = call(ep, "get_climate_settings")
    assert settings["result"]["fan_speed"] == "unknown" and settings["result"]["air_circulation"] == "AUTO"
    ep = car.episode(car.official_task("hallucination_f1"))
    call(ep, "set_fan_speed", level=3)
    assert ep.hallucinated == ["set_fan_speed.level"]


def test_a_removed_result_field_is_blanked_in_that_episode_only(car):
    """A hallucination task blanks a result field in its own answers; the domain's data (read by every later
    episode of the process) keeps the value, so a run's rows never depend on what ran before it."""
    from evosyn.envs.car_bench.state import CarInitialState

    routes = {"start_id": "loc_mun_9995", "destination_id": "loc_aug_1002"}
    removed = car.episode(CarInitialState(
        removed_part=["result.get_routes_from_start_to_destination.routes.distance_km"]))
    blanked, _ = call(removed, "get_routes_from_start_to_destination", **routes)
    assert {r["distance_km"] for r in blanked["result"]["routes"]} == {"unknown"}
    answer, _ = call(car.episode(), "get_routes_from_start_to_destination", **routes)
    assert all(isinstance(r["distance_km"], (int, float)) for r in answer["result"]["routes"])
