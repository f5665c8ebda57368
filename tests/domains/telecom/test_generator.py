"""The embedded telecom generator: every family and outcome, exact write and read counts, executed gold."""
from __future__ import annotations

import pytest

from evosyn.agents.plans import BUCKET_RANGE, Infeasible
from tests.domains.telecom.conftest import FAMILIES, selection


def _first(generator, sel, seeds=range(8)):
    for seed in seeds:
        try:
            return generator.plan(sel, "bp-test", seed)
        except Infeasible:
            continue
    return None


def _writes(telecom, plan):
    return [a for a in plan.actions if telecom.tool_kind(a[0], a[2] if len(a) > 2 else "assistant") == "write"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("outcome", ["fulfill", "refuse"])
def test_every_family_and_outcome_is_realized(generator, family, outcome):
    plan = _first(generator, selection(family, outcome))
    assert plan is not None
    assert plan.initial_state["initialization_actions"][0]["func_name"] == "set_user_info"
    assert (plan.refusal is not None) == (outcome == "refuse")


@pytest.mark.parametrize("bucket", ["1", "2", "3-4", "5+"])
@pytest.mark.parametrize("family", FAMILIES)
def test_num_write_is_exact_and_every_write_changes_state(telecom, generator, family, bucket):
    plan = _first(generator, selection(family, "fulfill", bucket))
    assert plan is not None
    lo, hi = BUCKET_RANGE[bucket]
    assert lo <= len(_writes(telecom, plan)) <= hi
    assert generator.run(plan.initial_state["initialization_actions"], plan.actions) is not None


@pytest.mark.parametrize("family,writes,reads", [("account_profile_update", "0", "1"), ("line_management", "1", "2"),
                                                 ("line_management", "1", "3-4"), ("billing_issue", "2", "5+"),
                                                 ("device_upgrade", "refuse", "0")])
def test_num_read_is_exact(telecom, generator, family, writes, reads):
    outcome = "refuse" if writes == "refuse" else "fulfill"
    plan = _first(generator, selection(family, outcome, "0" if outcome == "refuse" else writes, reads))
    assert plan is not None
    n = sum(telecom.tool_kind(a[0], a[2] if len(a) > 2 else "assistant") == "read" for a in plan.actions)
    assert BUCKET_RANGE[reads][0] <= n <= BUCKET_RANGE[reads][1]


def test_troubleshooting_breaks_the_phone_and_the_gold_fixes_it_on_the_device(telecom, generator):
    from evosyn.domains.telecom.device import device_works

    plan = _first(generator, selection("service_troubleshooting", "fulfill", "2"))
    inits = plan.initial_state["initialization_actions"]
    assert any(i["env_type"] == "user" and i["func_name"] != "set_user_info" for i in inits)
    device_fixes = [a for a in _writes(telecom, plan) if len(a) > 2 and a[2] == "user"]
    assert device_fixes
    broken = generator.run(inits, [])
    mms = any(a[0] == "can_send_mms" for a in plan.actions)
    assert not device_works(broken, mms)
    assert device_works(generator.run(inits, plan.actions), mms)
    # without the user's fixes the phone stays broken
    agent_only = [a for a in plan.actions if not (len(a) > 2 and a[2] == "user")]
    assert not device_works(generator.run(inits, agent_only), mms)


def test_refusals_change_nothing_and_name_a_rule(telecom, generator):
    from evosyn.domains.telecom.refusals import RULES

    for family in FAMILIES:
        plan = _first(generator, selection(family, "refuse"))
        assert not _writes(telecom, plan)
        assert plan.refusal["code"] in RULES and plan.refusal["rule"] == RULES[plan.refusal["code"]]


def test_refusal_with_writes_is_infeasible(generator):
    with pytest.raises(Infeasible):
        generator.plan(selection("billing_issue", "refuse", "1"), "bp", 0)


def test_plans_are_deterministic(generator):
    sel = selection("service_troubleshooting", "fulfill", "3-4")
    a, b = generator.plan(sel, "bp", 4), generator.plan(sel, "bp", 4)
    assert a.actions == b.actions and a.initial_state == b.initial_state
