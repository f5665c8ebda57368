"""Every pack's maps name real tools of its environment and real values of its initial space."""
import pytest

from evosyn.envs.packs import get_domain, get_pack, known
from evosyn.envs.properties import PROPERTIES
from evosyn.envs.reference import reference_values

RUNNABLE = known(with_environment=True)


def _space(name):
    return {f["key"]: set(f["values"]) for f in get_pack(name).initial_space()["factors"]}


@pytest.mark.parametrize("name", RUNNABLE)
def test_factor_maps_name_write_tools_and_space_values(name):
    pack, dom, space = get_pack(name), get_domain(name), _space(name)
    writes = {t.name for t in dom.tools() if t.kind == "write"}
    assert set(pack.family_by_tool) <= writes and set(pack.focus_by_tool) <= writes
    assert set(pack.family_by_tool.values()) | {pack.default_family} <= space["task_family"]
    assert {f for _, f in pack.family_keywords} <= space["task_family"]
    assert set(pack.focus_by_tool.values()) <= space.get("policy_or_constraint_focus", set())
    assert set(pack.shape_values.values()) <= space["tool_use_pattern"]


@pytest.mark.parametrize("name", RUNNABLE)
def test_change_kinds_are_reference_values(name):
    pack, dom = get_pack(name), get_domain(name)
    ref = reference_values(pack)["state_change_type"]
    assert {"none", "mixed"} <= set(ref)
    for tool in (t.name for t in dom.tools() if t.kind == "write"):
        kind = next((k for prefix, k in pack.change_kind_by_prefix if tool.startswith(prefix)), "modify")
        assert kind in ref, (name, tool, kind)


@pytest.mark.parametrize("name", RUNNABLE)
def test_planner_rules_name_space_values(name):
    rules, space = get_pack(name).planner_rules, _space(name)
    families = set(rules.violable) | set(rules.no_read_refusals) | set(rules.info_families) | set(
        rules.min_refusal_reads)
    assert families <= space["task_family"]
    assert {f for foci in rules.violable.values() for f in foci} <= space.get("policy_or_constraint_focus", set())
    values = {**space, **{k: set(p.values) for k, p in PROPERTIES.items()}}  # the counts a Reflector may add
    for cause, wants in rules.implies.items():
        for part in cause.split("&"):  # every factor=value a (conjunctive) cause names
            key, _, value = part.partition("=")
            assert value in values[key], cause
        assert all(set(options) <= values[other] for other, options in wants.items()), cause


@pytest.mark.parametrize("name", RUNNABLE)
def test_extra_write_is_a_write_tool_or_none(name):
    dom = get_domain(name)
    args = [{"user_id": "u1", "customer_id": "c1", "line_id": "l1"}]
    call = get_pack(name).extra_write(args)
    if call is not None:
        assert dom.tool_kind(call.name) == "write" and dom.validate_arguments(call.name, call.arguments) is None
    assert get_pack(name).extra_write([]) is None
