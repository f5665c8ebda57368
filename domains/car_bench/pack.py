"""CAR-bench (in-car assistant): the App. B.1 initial space and the hooks of its environment.

The environment is ``evosyn.envs.car_bench.domain.CarBenchDomain`` (CAR-bench's data
from the run config's ``env_data: {car_bench: FOLDER}``, ``$EVOSYN_CARBENCH_DATA`` or the
bundled fixture); its machine-checked rules are ``evosyn.envs.car_bench.policy.check_write``
before each write, and CAR-bench's reward is ``evosyn.envs.car_bench.reward.reward``
(the verifier's reward for this domain, ``CarBenchDomain.reward``). The embedded
generator is ``generator.CarBenchGenerator`` over the recipes of ``recipes.py``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evosyn.envs import properties
from evosyn.envs.packs import DomainPack, PackError, PlannerRules, UserPhrasing

HALLUCINATION = ("hallucination_missing_tool", "hallucination_missing_param", "hallucination_missing_result")
WRITING = ("fulfill_reach_goal", "resolve_from_preferences", "clarify_with_user")  # behaviours that may write
# the fewest lookups a family's requests make (recipes.py), by what the assistant does: a blueprint asking for
# fewer reads gets a bucket that holds them (climate and window requests need at most one)
FEWEST_READS = {
    "navigation": {"expected_behavior=fulfill_reach_goal": 2, "expected_behavior=clarify_with_user": 2,
                   "expected_behavior=resolve_from_preferences": 3, "task_nature=base_execute": 2,
                   "task_nature=hallucination_missing_tool": 2, "task_nature=hallucination_missing_param": 2},
    "charging": {"expected_behavior=fulfill_reach_goal": 2, "expected_behavior=clarify_with_user": 2,
                 "expected_behavior=resolve_from_preferences": 3},
    "communication": {"expected_behavior=fulfill_reach_goal": 2, "expected_behavior=clarify_with_user": 2,
                      "task_nature=hallucination_missing_tool": 2, "task_nature=hallucination_missing_param": 2},
    "info_query": {"expected_behavior=resolve_from_preferences": 2},
}
BUCKET_TOPS = {"1": 1, "2": 2}  # the read buckets below the fewest some request needs (0: its own rule)


def _read_rules() -> dict[str, dict[str, list[str]]]:
    out = {}
    for family, needs in FEWEST_READS.items():
        for cause, fewest in needs.items():
            for bucket, top in BUCKET_TOPS.items():
                if top < fewest:
                    out[f"num_read={bucket}&task_family={family}&{cause}"] = {
                        "num_read": ["3-4", "5+"] if fewest > 2 else ["2", "3-4", "5+"]}
    return out


# the rules apply in this order, each seeing what the ones before it forced
PLANNER_RULES = PlannerRules(implies={
    # no read: a plain setting, fulfilled with a write
    "num_read=0": {"task_family": ["climate_control", "window_and_body"], "task_nature": ["base_execute"],
                   "expected_behavior": ["fulfill_reach_goal"], "num_write": ["1", "2", "3-4", "5+"]},
    # a task type fixes what a correct assistant does; a declined request changes nothing
    **{f"task_nature={n}": {"expected_behavior": ["decline_infeasible"]} for n in HALLUCINATION},
    "task_nature=disambiguation_internal": {"expected_behavior": ["resolve_from_preferences"]},
    "task_nature=disambiguation_user": {"expected_behavior": ["clarify_with_user"]},
    "expected_behavior=decline_infeasible": {"num_write": ["0"]},
    # no write and not declined: an information request
    **{f"num_write=0&expected_behavior={b}": {"task_family": ["charging", "info_query"]} for b in WRITING},
    **_read_rules(),
})

PHRASING = UserPhrasing(
    identity="I am in my car.", known_identity="You are sitting in your car and talk to its voice assistant.",
    give_identity="I am the driver.", ask_identity="Sure. Are you the driver?",
    vague_opening="I need something in the car.", vague_hint="something in the car",
    stress="Please be quick, I am driving.", unknown_info="You do not know how the car's functions are named.",
    identity_words=("driver",))


class CarBenchPack(DomainPack):
    name = "car_bench"
    description = "CAR-bench in-car assistant: vehicle, navigation, charging, communication"

    def environment(self):
        from evosyn.envs.car_bench.domain import CarBenchDomain

        return CarBenchDomain()

    def environment_from(self, folder):
        """CAR-bench's data from ``folder`` (the run config's ``env_data``), its task files read now: a folder
        not in CAR-bench's layout, or a task row that does not parse, is one line before any work."""
        from evosyn.envs.car_bench.data import DataMissing
        from evosyn.envs.car_bench.domain import CarBenchDomain

        try:
            env = CarBenchDomain(folder)
            env.splits()
        except (DataMissing, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            first = " ".join(str(exc).split())[:300]
            raise PackError(f"env_data.car_bench: {first}") from None
        return env

    planner_rules = PLANNER_RULES
    phrasing = PHRASING
    # the counts a blueprint may request: the generator realizes each bucket (further requests, side lookups)
    controllable = properties.controllable("num_write", "num_read")
    # 2: requested counts drawn within their bucket from what the request makes, further writes before a phone call
    generator_version = "2"

    def task_builder(self, domain, prior):
        from evosyn.domains.car_bench.generator import CarBenchGenerator

        return CarBenchGenerator(domain, prior)

    family_by_tool = {"set_climate_temperature": "climate_control", "set_seat_heating": "climate_control",
                      "set_air_conditioning": "climate_control", "set_fan_speed": "climate_control",
                      "open_close_window": "window_and_body", "open_close_sunroof": "window_and_body",
                      "open_close_sunshade": "window_and_body", "set_ambient_lights": "window_and_body",
                      "set_fog_lights": "window_and_body", "open_close_trunk_door": "window_and_body",
                      "set_new_navigation": "navigation", "call_phone_by_number": "communication",
                      "send_email": "communication"}
    family_keywords = [("navigat", "navigation"), ("route", "navigation"), ("charge", "charging"),
                       ("battery", "charging"), ("call", "communication"), ("email", "communication"),
                       ("weather", "info_query"), ("temperature", "climate_control"), ("window", "window_and_body")]
    default_family = "info_query"
    shape_values = {"lookup_then_modify": "read_then_set"}  # the generic shapes this space names (App. B.1)

    def policy_rules(self) -> Callable[[Any, Any, list[Any]], list[str]] | None:
        from evosyn.envs.car_bench.policy import check_write

        return check_write

    compute_tools = ("calculate_math", "calculate_datetime")
    transfer_tools = ()
    # words of the three confirmation tools' names a confirmation request need not repeat ("open the trunk?")
    confirmation_stopwords = ("open", "close", "door", "set", "head", "lights", "send")
