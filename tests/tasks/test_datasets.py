"""SFT examples: the tool schemas validated once per domain give the rows that validating them per example gave."""
from __future__ import annotations

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_domain, get_pack
from evosyn.tasks.datasets import _unit, sft_examples
from evosyn.tasks.stages import Ctx
from evosyn.tasks.synthesis import run_pass
from evosyn.storage.records import SFTExample
from evosyn.storage.store import Store


def test_examples_equal_the_per_example_validated_ones(tmp_path):
    space = load_initial_space(get_pack("airline"), run_id="ds")
    result = run_pass(Ctx(Store(tmp_path), "ds", 0, 3, get_domain("airline")), space, ColdStart(), 12)
    kept = [(c.task, c.trajectory) for c in result.kept]
    assert len(kept) >= 8
    schemas = [t.openai_schema() for t in get_domain("airline").tools("assistant")]
    want = [SFTExample(run_id=tr.run_id, round=tr.round, space_version=tr.space_version,
                       direction_id=tr.direction_id, blueprint_id=tr.blueprint_id,
                       example_id="ex-" + tr.trajectory_id[3:], task_id=t.task_id, trajectory_id=tr.trajectory_id,
                       split="diagnostic" if _unit(f"5/{t.task_id}") < 0.3 else "train", messages=tr.messages,
                       tools=schemas) for t, tr in kept]
    got = sft_examples(kept, get_domain("airline"), 0.3, seed=5)
    assert [e.model_dump() for e in got] == [e.model_dump() for e in want]
    assert [e.model_dump_json() for e in got] == [e.model_dump_json() for e in want]
    assert {e.split for e in got} == {"train", "diagnostic"}  # both splits, as the seed decides
    assert got[0].tools and got[0].model_fields_set == want[0].model_fields_set


def test_a_car_bench_example_carries_the_tools_and_policy_its_task_gives_the_agent(tmp_path):
    from evosyn.tasks.datasets import system_prompt

    store = Store(tmp_path)
    space = load_initial_space(get_pack("car_bench"), run_id="cb")
    result = run_pass(Ctx(store, "cb", 0, 0, get_domain("car_bench")), space, ColdStart(), 24)
    car = get_domain("car_bench")
    kept = [(c.task, c.trajectory) for c in result.kept]
    examples = {e.task_id: e for e in sft_examples(kept, car, 0.0, seed=0)}
    policy = system_prompt(store, "cb", car)
    types = set()
    for task, _ in kept:
        env_task = car.task_from_json(task.definition)
        types.add(env_task.task_type)
        want = SFTExample(run_id="-", round=0, example_id="-", task_id="-", trajectory_id="-", messages=[],
                          tools=[t.openai_schema() for t in car.tools_for(env_task)]).tools
        assert examples[task.task_id].tools == want
        assert policy(examples[task.task_id]) == car.task_policy(env_task)
    assert "hallucination_missing_tool" in types  # one whose list is shorter than the domain's
    assert min(len(e.tools) for e in examples.values()) < len(car.tools("assistant"))
    assert system_prompt(store, "cb", get_domain("airline")) == get_domain("airline").policy

def test_the_trajectories_a_learner_trains_on_open_with_their_agents_system_prompt(tmp_path):
    from evosyn.agents.learners.prompt import stated_values
    from evosyn.tasks.datasets import as_trajectories, system_prompt, with_policy

    store = Store(tmp_path)
    result = run_pass(Ctx(store, "cb", 0, 0, get_domain("car_bench")), load_initial_space(get_pack("car_bench"), run_id="cb"), ColdStart(), 8)
    car = get_domain("car_bench")
    kept = [(c.task, c.trajectory) for c in result.kept]
    trajectories = as_trajectories(sft_examples(kept, car, 0.0, seed=0), system_prompt(store, "cb", car))
    by_task = {t.task_id: t for t in trajectories}
    for task, traj in kept:
        got, policy = by_task[task.task_id], car.task_policy(car.task_from_json(task.definition))
        assert got.messages[0].role == "system" and got.messages[0].content == policy
        assert got.messages[1:] == traj.messages
        assert with_policy(car, task, traj).messages == got.messages
        assert "current_location" in stated_values(policy)  # the car's location, as the learner reads it
    plain = as_trajectories(sft_examples(kept, car, 0.0, seed=0))
    assert [t.messages for t in plain] == [traj.messages for _, traj in kept]
