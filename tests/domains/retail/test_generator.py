"""The embedded retail generator: every family and outcome, exact write / read buckets, real rules."""
import pytest

from evosyn.agents.plans import BUCKET_RANGE, Infeasible
from evosyn.envs.factors import bucket
from tests.domains.retail.checks import gold_run, plan_problems

FAMILIES = ["order_cancellation", "order_item_modification", "order_logistics_modification",
            "return_delivered_order", "exchange_delivered_order", "profile_or_inquiry"]
SEEDS = range(3)
COMBOS = [(f, "fulfill", b) for f in FAMILIES for b in BUCKET_RANGE] + [(f, "refuse", "0") for f in FAMILIES]


def _keywords():
    from evosyn.envs.packs import UnknownDomain, get_pack

    try:
        return get_pack("retail").family_keywords
    except UnknownDomain:  # before the retail pack registers its maps
        from evosyn.envs.factors import FAMILY_KEYWORDS

        return FAMILY_KEYWORDS["retail"]


@pytest.mark.parametrize("family, outcome, writes", COMBOS)
def test_plans_execute_pass_the_rules_and_hit_the_write_bucket(retail_env, generator, family, outcome, writes):
    for seed in SEEDS:
        sel = {"task_family": [family], "expected_outcome": [outcome], "num_write": [writes],
               "difficulty_profile": [["easy", "medium", "hard"][seed]]}
        plan = generator.plan(sel, f"test-{family}-{outcome}-{writes}", seed)
        problems, n_writes, _ = plan_problems(retail_env, plan)
        assert not problems, problems
        assert bucket(n_writes) == writes
        assert plan.actions[0][0] in ("find_user_id_by_email", "find_user_id_by_name_zip") or outcome == "refuse"
        if outcome == "refuse":
            assert plan.refusal["rule"] and plan.refusal["code"] and plan.info == ["cannot"]
        if n_writes == 0:  # observed family comes from the request's keywords
            first = next((fam for kw, fam in _keywords() if kw in plan.intents[0]["say"].lower()), "profile_or_inquiry")
            assert first == family, plan.intents[0]["say"]
        else:  # ... else from the first write
            first_write = next(a[0] for a in plan.actions if retail_env.tool_kind(a[0]) == "write")
            assert plan.intents[0]["tool"] == first_write


@pytest.mark.parametrize("family, outcome, reads", [
    ("order_cancellation", "refuse", "0"), ("profile_or_inquiry", "fulfill", "1"),
    ("return_delivered_order", "fulfill", "2"), ("exchange_delivered_order", "fulfill", "3-4"),
    ("order_logistics_modification", "refuse", "5+"), ("order_item_modification", "fulfill", "5+")])
def test_read_bucket_is_exact(retail_env, generator, family, outcome, reads):
    for seed in SEEDS:
        sel = {"task_family": [family], "expected_outcome": [outcome], "num_read": [reads],
               "num_write": ["0" if outcome == "refuse" else "1"]}
        plan = generator.plan(sel, "reads", seed)
        problems, _, n_reads = plan_problems(retail_env, plan)
        assert not problems and bucket(n_reads) == reads


def test_identity_is_email_or_name_and_zip(generator):
    seen = set()
    for seed in range(12):
        plan = generator.plan({"task_family": ["order_cancellation"], "expected_outcome": ["fulfill"],
                               "num_write": ["1"]}, "identity", seed)
        name, _args = plan.actions[0]
        user = generator.base.users[plan.user_id]
        if name == "find_user_id_by_email":
            assert user.email in plan.known_info
        else:
            assert user.address.zip in plan.known_info and user.name.first_name in plan.known_info
        seen.add(name)
    assert seen == {"find_user_id_by_email", "find_user_id_by_name_zip"}


def test_once_per_order_refusal_starts_from_a_modified_order(retail_env, generator):
    sel = {"task_family": ["order_item_modification"], "expected_outcome": ["refuse"], "num_write": ["0"],
           "policy_or_constraint_focus": ["once_per_order_action_lock"]}
    plan = generator.plan(sel, "once", 0)
    assert plan.refusal["code"] == "once_per_order" and plan.initial_state is not None
    _, _, _, _, episode = gold_run(retail_env, plan)
    order = episode.env.tools.db.orders[plan.intents[0]["arguments"]["order_id"]]
    assert order.status == "pending (item modified)"


def test_selected_focus_picks_the_rule(generator):
    sel = {"task_family": ["order_cancellation"], "expected_outcome": ["refuse"], "num_write": ["0"],
           "policy_or_constraint_focus": ["cancellation_reason_validity"]}
    assert {generator.plan(sel, "focus", s).refusal["code"] for s in range(5)} == {"cancel_reason"}


def test_plans_are_deterministic(generator):
    sel = {"task_family": ["exchange_delivered_order"], "expected_outcome": ["fulfill"], "num_write": ["3-4"]}
    assert generator.plan(sel, "same", 7) == generator.plan(sel, "same", 7)
    assert generator.plan(sel, "same", 7) != generator.plan(sel, "same", 8)


def test_impossible_selections_are_infeasible(generator):
    with pytest.raises(Infeasible):
        generator.plan({"task_family": ["order_cancellation"], "expected_outcome": ["refuse"],
                        "num_write": ["1"]}, "x", 0)
    with pytest.raises(Infeasible):  # every fulfilment starts with the authentication lookup
        generator.plan({"task_family": ["profile_or_inquiry"], "expected_outcome": ["fulfill"],
                        "num_read": ["0"]}, "x", 0)


def test_identity_line_is_first_person(generator):
    from evosyn.domains.retail.generator import identity_line

    for seed in range(6):
        plan = generator.plan({"task_family": ["profile_or_inquiry"], "expected_outcome": ["fulfill"],
                               "num_write": ["1"]}, "line", seed)
        line = identity_line(plan.known_info)
        assert line.startswith(("My email is", "I am")) and "your" not in line.lower()


def test_sample_customers_are_real(generator):
    import random

    from evosyn.domains.retail.generator import sample_customers

    customers = sample_customers(generator.base, random.Random(0), k=3)
    assert len(customers) == 3
    for c in customers:
        user = generator.base.users[c["user_id"]]
        assert c["email"] == user.email and [o["order_id"] for o in c["orders"]] == user.orders[:6]
