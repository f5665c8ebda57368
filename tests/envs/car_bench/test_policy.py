from evosyn.envs.car_bench.policy import (
    AUT_POLICIES,
    LLM_POLICIES,
    check_write,
    step_violations,
)
from evosyn.envs.car_bench.state import CarState
from evosyn.storage.records import Message, ToolCall


def tc(name, **arguments):
    return ToolCall(id=name, name=name, arguments=arguments)


def test_nineteen_policies_split_into_checked_and_judged():
    assert len(AUT_POLICIES) == 12 and len(LLM_POLICIES) == 7 and not set(AUT_POLICIES) & set(LLM_POLICIES)


def test_outcome_rules_look_at_the_final_state():
    before = {"get_weather", "get_climate_settings", "get_exterior_lights_status"}
    good = CarState(sunshade_position=100, fan_speed=2, fan_airflow_direction="WINDSHIELD_FEET",
                    air_conditioning=True, head_lights_low_beams=True, fog_lights=True)
    calls = [tc("open_close_sunroof", percentage=40), tc("set_window_defrost", on=True, defrost_window="ALL"),
             tc("set_air_conditioning", on=True), tc("set_fog_lights", on=True)]
    assert step_violations(calls, before, good) == []
    bad = good.model_copy(update={"sunshade_position": 20, "fan_speed": 0, "head_lights_high_beams": True,
                                  "window_driver_position": 50})
    codes = [v[8:11] for v in step_violations(calls, before, bad)]
    assert codes == ["005", "010", "011", "013"]  # the AC ordering rule waits until windows were looked at
    assert step_violations([tc("set_head_lights_high_beams", on=True)], {"set_fog_lights"}, good)[0][8:11] == "014"
    # rear defrost, closing the roof and switching things off are never restricted
    off = [tc("open_close_sunroof", percentage=0), tc("set_window_defrost", on=True, defrost_window="REAR"),
           tc("set_fog_lights", on=False)]
    assert step_violations(off, set(), bad) == []


def test_ordering_rules_need_the_look_up_in_an_earlier_turn():
    state = CarState(sunshade_position=100, fan_speed=2, fan_airflow_direction="WINDSHIELD", air_conditioning=True)
    same_turn = [tc("get_weather"), tc("open_close_sunroof", percentage=50)]
    assert [v[8:11] for v in step_violations(same_turn, set(), state)] == ["009"]
    assert step_violations([tc("set_window_defrost", on=True, defrost_window="FRONT")],
                           {"set_fan_speed", "set_fan_airflow_direction", "set_air_conditioning"}, state) == []
    edits = [tc("navigation_delete_waypoint"), tc("navigation_add_one_waypoint")]
    assert [v[8:11] for v in step_violations(edits, set(), None)] == ["018"]


def test_the_write_hook_checks_order_and_confirmation(car):
    episode = car.episode()
    roof = tc("open_close_sunroof", percentage=50)
    history = [Message(role="user", content="open the roof"), Message(role="assistant", tool_calls=[roof])]
    assert [v[:13] for v in check_write(episode, roof, history)] == ["[AUT-POL:009]", "[AUT-POL:005]"]
    trunk = tc("open_close_trunk_door", action="OPEN")
    asked = [Message(role="user", content="open the trunk"),
             Message(role="assistant", content="Shall I open the trunk door for you?"),
             Message(role="user", content="Yes, please."), Message(role="assistant", tool_calls=[trunk])]
    assert check_write(episode, trunk, asked) == []
    assert "[confirmation]" in check_write(episode, trunk, [asked[0], asked[-1]])[0]
