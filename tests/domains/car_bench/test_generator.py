"""The embedded CAR-bench generator: every task type, valid CAR-bench rows, gold rollouts CAR-bench scores 1."""
import json
from itertools import product

import pytest

from evosyn.agents.generator import EmbeddedGenerator, GenerationError
from evosyn.agents.teacher import EmbeddedTeacher
from evosyn.agents.verifier import verify
from evosyn.envs.car_bench.reward import reward
from evosyn.envs.car_bench.tasks import CarBenchTask
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_domain
from evosyn.storage.records import Blueprint, DifficultyControls, Factor

NATURES = {"base_execute": ("base", "fulfill_reach_goal"),
           "hallucination_missing_tool": ("hallucination_missing_tool", "decline_infeasible"),
           "hallucination_missing_param": ("hallucination_missing_tool_parameter", "decline_infeasible"),
           "hallucination_missing_result": ("hallucination_missing_tool_response", "decline_infeasible"),
           "disambiguation_internal": ("disambiguation_internal", "resolve_from_preferences"),
           "disambiguation_user": ("disambiguation_user", "clarify_with_user")}
FAMILIES = ["climate_control", "window_and_body", "navigation", "charging", "communication", "info_query"]


@pytest.fixture(scope="module")
def car():
    return get_domain("car_bench")


@pytest.fixture(scope="module")
def space(car):
    """The App. B.1 space (every task type)."""
    return load_initial_space(car.pack, run_id="t")


@pytest.fixture(scope="module")
def counted(space):
    """``space`` plus the write and read counts, as a Reflector adds them."""
    counts = [Factor(key=k, values=["0", "1", "2", "3-4", "5+"], status="experimental", observable=True,
                     added_in=2) for k in ("num_write", "num_read")]
    return space.model_copy(update={"version": 2, "factors": space.factors + counts})


def blueprint(sel, name):
    controls = DifficultyControls(expected_tool_calls="2-3", num_policy_constraints="0", num_entities="1",
                                  requires_clarification=False, allows_user_false_claim=False,
                                  requires_state_change=True)
    full = {"tool_use_pattern": ["single_set"], "state_precondition": ["no_precondition"],
            "interaction_challenge": ["cooperative_clear"], "difficulty_profile": ["medium"], **sel}
    return Blueprint(run_id="t", round=0, blueprint_id=name, plan_id="p", domain="car_bench", seed=0,
                     selected_dimensions=full, generation_intent="test", expected_difficulty_controls=controls)


@pytest.mark.parametrize("family, nature", list(product(FAMILIES, NATURES)))
def test_every_family_and_task_type_is_a_verified_car_bench_task(car, space, family, nature):
    task_type, behavior = NATURES[nature]
    bp = blueprint({"task_family": [family], "task_nature": [nature], "expected_behavior": [behavior]},
                   f"b-{family}-{nature}")
    task = EmbeddedGenerator(car).generate(bp, space)
    row = task.definition
    assert isinstance(row["actions"], str) and isinstance(row["context_init_config"], str)  # the dataset's form
    env_task = car.task_from_json(row)
    assert isinstance(env_task, CarBenchTask) and env_task.task_type == task_type  # requested = realized
    assert env_task.persona and env_task.instruction
    if nature.startswith("hallucination"):
        assert env_task.removed_part and not any(car.tool_kind(a.name) == "write" for a in env_task.gold_actions)
    if nature == "disambiguation_internal":
        assert any(a.name == "get_user_preferences" for a in env_task.gold_actions)
        assert json.loads(row["context_init_config"])["user_preferences"]
    traj = EmbeddedTeacher(car).rollout(task)
    if nature == "disambiguation_user":  # the assistant asks for the value the driver left out, then acts
        asked = next(i for i, m in enumerate(traj.messages) if m.role == "assistant" and "?" in (m.content or ""))
        assert traj.messages[asked + 1].role == "user" and not any(m.tool_calls for m in traj.messages[:asked])
    verdict = verify(task, traj, car)
    assert verdict.passed, [c for c in verdict.checks if not c.passed]
    assert reward(car, env_task, traj.messages).reward == 1.0


@pytest.mark.parametrize("writes, reads", [("0", "2"), ("1", "0"), ("2", "1"), ("3-4", "3-4"), ("5+", "5+")])
def test_requested_write_and_read_counts_are_realized(car, counted, writes, reads):
    family = "info_query" if writes == "0" else "climate_control" if reads == "0" else "window_and_body"
    sel = {"task_family": [family], "task_nature": ["base_execute"], "expected_behavior": ["fulfill_reach_goal"],
           "num_write": [writes], "num_read": [reads]}
    task = EmbeddedGenerator(car).generate(blueprint(sel, f"b-{writes}-{reads}"), counted)
    verdict = verify(task, EmbeddedTeacher(car).rollout(task), car)
    assert verdict.passed, [c for c in verdict.checks if not c.passed]  # the factor gate compares them
    assert verdict.observed["num_write"] == [writes] and verdict.observed["num_read"] == [reads]


def test_a_selection_no_recipe_realizes_is_a_generation_error(car, counted):
    sel = {"task_family": ["window_and_body"], "task_nature": ["hallucination_missing_tool"],
           "expected_behavior": ["decline_infeasible"], "num_write": ["2"]}  # a declined request changes nothing
    with pytest.raises(GenerationError, match="infeasible"):
        EmbeddedGenerator(car).generate(blueprint({**sel, "num_read": ["1"]}, "b-info-writes"), counted)


def test_every_blueprint_the_planner_makes_over_the_counts_is_built_with_the_counts_it_requests(car, counted):
    """The pack's rules (the fewest reads each request makes, no write in a declined one) and the generator
    together: requested = realized for every blueprint, before any rollout or gate."""
    from evosyn.agents.planner import EmbeddedPlanner
    from evosyn.envs.properties import bucket
    from evosyn.storage.records import Direction

    planner = EmbeddedPlanner(rules=car.pack.planner_rules)
    d = Direction(run_id="t", round=1, direction_id="d", condition_id="c", objective_type="exploration",
                  objective="x", budget_level="explore")
    seen = set()
    for n in range(150):
        bp = planner.plan(d, counted, None, index=n, seed=0)
        sel = bp.selected_dimensions
        task = EmbeddedGenerator(car).generate(bp, counted)  # a GenerationError fails the test
        kinds = [car.tool_kind(a.name) for a in car.task_from_json(task.definition).gold_actions]
        assert [bucket(kinds.count("write")), bucket(kinds.count("read"))] == \
            [sel["num_write"][0], sel["num_read"][0]], sel
        seen.add((sel["task_nature"][0], sel["num_write"][0], sel["num_read"][0]))
    assert len({s[0] for s in seen}) == 6 and len({s[1] for s in seen}) == 5 and len({s[2] for s in seen}) == 5


def test_a_requested_write_that_would_change_nothing_is_replanned_on_another_request(car, counted):
    """The car starts at 20 degrees (CAR-bench's default): setting 20 changes nothing, so the verifier would
    count no write; the generator builds the blueprint from a recipe whose writes change the car."""
    sel = {"task_family": ["climate_control"], "task_nature": ["base_execute"],
           "expected_behavior": ["fulfill_reach_goal"], "num_write": ["1"], "num_read": ["0"]}
    for n in range(40):  # without the check, about 1 in 16 of these sets the car to the 20 degrees it is at
        task = EmbeddedGenerator(car).generate(blueprint(sel, f"b-noop-{n}"), counted)
        verdict = verify(task, EmbeddedTeacher(car).rollout(task), car)
        assert verdict.passed and verdict.observed["num_write"] == ["1"], [c for c in verdict.checks if not c.passed]


def test_the_llm_teacher_is_given_the_tasks_policy_and_tools(car, space):
    """A hallucination task's removed tool is not offered to the teacher; its policy has the task's car."""
    from evosyn.agents.llm import make_client
    from evosyn.agents.teacher import LLMTeacher
    from evosyn.config import RoleConfig
    from tests.fakes.openai_server import FakeLLMServer, openai_reply

    sel = {"task_family": ["climate_control"], "task_nature": ["hallucination_missing_tool"],
           "expected_behavior": ["decline_infeasible"]}
    task = EmbeddedGenerator(car).generate(blueprint(sel, "b-teacher"), space)
    env_task = car.task_from_json(task.definition)
    with FakeLLMServer(lambda request: openai_reply("I am sorry, this car cannot do that.")) as server:
        role = RoleConfig(backend="llm", provider="openai_compatible", model="m", base_url=server.base_url)
        LLMTeacher(car, make_client("teacher", role, cache=False), max_steps=1).rollout(task)
        body = server.requests[0]["body"]
    assert {t["function"]["name"] for t in body["tools"]} == {s.name for s in car.tools_for(env_task)}
    assert env_task.removed_part[0] not in {t["function"]["name"] for t in body["tools"]}
    assert car.task_policy(env_task) in body["messages"][0]["content"]
    assert car.task_policy(env_task) != car.policy
