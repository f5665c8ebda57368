from evosyn.agents.generator import EmbeddedGenerator, challenge_text, task_draft
from evosyn.agents.planner import EmbeddedPlanner
from evosyn.agents.plans import DefaultPrior, Plan
from evosyn.domains.airline.generator import AirlineGenerator
from evosyn.envs.packs import get_domain, get_pack
from evosyn.envs.tau2.task import draft_json
from evosyn.storage.records import Direction


def _blueprint(space, n=0):
    d = Direction(run_id="t", round=1, direction_id=f"d{n}", condition_id="c", objective_type="exploration",
                  objective="x", budget_level="explore")
    return EmbeddedPlanner(rules=get_pack("airline").planner_rules).plan(d, space, None, index=n, seed=0)


def test_the_pack_builds_the_airline_generator_and_plans_are_seeded(space):
    dom = get_domain("airline")
    builder = get_pack("airline").task_builder(dom, DefaultPrior())
    assert isinstance(builder, AirlineGenerator)
    bp = _blueprint(space)
    a = builder.plan(bp.selected_dimensions, bp.blueprint_id, bp.seed)
    b = AirlineGenerator(dom, DefaultPrior()).plan(bp.selected_dimensions, bp.blueprint_id, bp.seed)
    assert a == b and a.actions
    task = EmbeddedGenerator(dom).generate(bp, space)
    assert [x["name"] for x in task.tau2_task["evaluation_criteria"]["actions"]] == [x[0] for x in a.actions]
    # the gold final-state digest travels with the task, so verifiers need not replay the gold actions
    from evosyn.envs.replay import gold_replay

    gold_replay.cache_clear()
    assert task.gold_digest == f"{dom.digest_scheme}:{gold_replay(dom, dom.task_from_json(task.definition))[0]}"


def test_task_text_uses_the_pack_phrasing(space):
    bp = _blueprint(space)
    bp = bp.model_copy(update={"selected_dimensions": {**bp.selected_dimensions,
                                                       "interaction_challenge": ["missing_information",
                                                                                 "ambiguous_preference"]}})
    plan = Plan(user_id="mia_li_3668", actions=[("get_user_details", {"user_id": "mia_li_3668"}),
                                                 ("toggle_data", {}, "user")],
                intents=[{"say": "check my profile", "tool": None}], info=[])
    task = draft_json(task_draft("syn-x", bp, plan, get_pack("airline").phrasing))
    instr = task["user_scenario"]["instructions"]
    assert instr["known_info"] == "Your user id is mia_li_3668."
    assert instr["unknown_info"] == "You do not know the airline's internal rules."
    assert "Start vaguely ('one of my bookings')" in instr["task_instructions"]
    assert challenge_text(get_pack("airline").phrasing)["missing_information"] in instr["task_instructions"]
    assert [a["requestor"] for a in task["evaluation_criteria"]["actions"]] == ["assistant", "user"]
    assert "initial_state" not in task
    plan.known_info, plan.initial_state = "You know your phone number.", {"initialization_actions": []}
    task = draft_json(task_draft("syn-x", bp, plan, get_pack("airline").phrasing))
    assert task["user_scenario"]["instructions"]["known_info"] == "You know your phone number."
    assert task["initial_state"] == {"initialization_actions": []}


def test_a_domain_without_generator_is_a_generation_error(monkeypatch):
    from types import SimpleNamespace

    import pytest

    from evosyn.agents.generator import GenerationError
    from evosyn.envs import packs

    packs.known()
    monkeypatch.setattr(packs, "_PACKS", dict(packs._PACKS))

    class Bare(packs.DomainPack):
        name = "bare"

    bare = Bare()
    packs.register(bare)
    with pytest.raises(GenerationError, match="domain 'bare' has no embedded generator"):
        EmbeddedGenerator(SimpleNamespace(name="bare", pack=bare))
