
import pytest

from evosyn.envs.ontology import check_selection, load_initial_space
from evosyn.envs.packs import get_pack, known

PAPER_COUNTS = {  # values per factor in App. B.1
    "airline": [6, 2, 8, 7, 7, 3], "retail": [6, 2, 8, 7, 7, 3], "telecom": [6, 2, 6, 6, 6, 3],
    "car_bench": [6, 6, 4, 5, 4, 4, 3],
}


@pytest.mark.parametrize("domain", known())
def test_initial_spaces_load_as_v1(domain):
    space = load_initial_space(get_pack(domain))
    assert space.version == 1 and all(f.status == "seed" for f in space.factors)
    assert [len(f.values) for f in space.factors] == PAPER_COUNTS[domain]


def test_airline_cardinality_rules():
    space = load_initial_space(get_pack("airline"))
    card = {f.key: (f.cardinality.min, f.cardinality.max) for f in space.factors}
    assert card == {"task_family": (1, 1), "expected_outcome": (1, 1), "policy_or_constraint_focus": (1, 2),
                    "tool_use_pattern": (1, 3), "interaction_challenge": (0, 2), "difficulty_profile": (1, 1)}
    ok = {"task_family": ["flight_change"], "expected_outcome": ["refuse"],
          "policy_or_constraint_focus": ["fare_rule_constraint"], "tool_use_pattern": ["lookup_verify_then_modify"],
          "interaction_challenge": [], "difficulty_profile": ["easy"]}
    assert check_selection(space, ok) == []
    bad = {**ok, "tool_use_pattern": [], "task_family": ["teleport"], "num_write": ["1"]}
    problems = " | ".join(check_selection(space, bad))
    assert "teleport" in problems and "tool_use_pattern: needs 1..3" in problems and "'num_write' is not in" in problems


def test_car_bench_default_space_is_the_whole_app_b1_space_and_the_base_setting_a_space_file():
    from importlib import resources

    from evosyn.flows.cli_synth import load_space_file

    space = load_initial_space(get_pack("car_bench"))
    assert space.restrictions == {}  # every task type of App. B.1 is plannable by default
    sel = {f.key: [f.values[0]] for f in space.factors}
    sel["task_nature"], sel["expected_behavior"] = ["disambiguation_user"], ["clarify_with_user"]
    assert check_selection(space, sel) == []
    base = load_space_file(str(resources.files("evosyn.domains.car_bench") / "base_setting.json"), "car_bench", "t")
    assert base.restrictions == {"task_nature": ["base_execute"],
                                 "expected_behavior": ["fulfill_reach_goal", "resolve_from_preferences"]}
    assert [f.key for f in base.factors] == [f.key for f in space.factors]
    assert any("restriction" in p for p in check_selection(base, sel))


def test_initial_factors_join_v1_as_standard_factors():
    space = load_initial_space(get_pack("retail"), extra=["num_write", "multi_item"])
    added = space.factors[-2:]
    assert space.version == 1 and [f.key for f in added] == ["num_write", "multi_item"]
    assert all(f.status == "standard" and f.added_in == 1 and f.observable for f in added)
    assert [f.values for f in added] == [get_pack("retail").controllable[k] for k in ("num_write", "multi_item")]
    assert [f.key for f in load_initial_space(get_pack("retail")).factors] == [f.key for f in space.factors[:-2]]


@pytest.mark.parametrize("names, message", [
    (["teleports"], r"initial_factors: the telecom generator does not control 'teleports' \(it controls: num_write"),
    (["multi_item"], "initial_factors: the telecom generator does not control 'multi_item'"),
    (["num_read", "num_read"], "initial_factors: 'num_read' is named twice"),
    (["task_family"], "initial_factors: the telecom generator does not control 'task_family'"),
])
def test_initial_factors_errors_name_the_field(names, message):
    from evosyn.storage.userfiles import ConfigError

    with pytest.raises(ConfigError, match=message):
        load_initial_space(get_pack("telecom"), extra=names)
