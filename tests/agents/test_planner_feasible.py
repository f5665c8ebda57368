"""Feasibility-aware planning: the Planner asks the embedded generator whether a selection can be built and draws
again where not, so a round's budget goes to tasks; where every first sample is buildable, nothing changes."""
from __future__ import annotations

from evosyn.agents.designer import ColdStart, EmbeddedDesigner
from evosyn.agents.generator import EmbeddedGenerator, GenerationError
from evosyn.agents.planner import EmbeddedPlanner, PlanError
from tests.agents.conftest import with_factor


def _blueprints(planner, directions, space, feasible=None):
    out = []
    for d in directions:
        for i in range(d.n_blueprints):
            try:
                out.append(planner.plan(d, space, None, index=i, seed=3, feasible=feasible))
            except PlanError:
                out.append(None)
    return out


def _infeasible(gen, space, blueprints) -> int:
    n = 0
    for bp in blueprints:
        try:
            gen.generate(bp, space)
        except GenerationError as exc:
            n += "infeasible" in str(exc)
    return n


def test_the_planner_spends_no_blueprint_on_a_combination_the_generator_refuses(space, rules, airline):
    sp = with_factor(with_factor(space, "num_write", airline.pack.controllable["num_write"]),
                     "distinct_tools", airline.pack.controllable["distinct_tools"])
    # the round that adds distinct_tools asks for few distinct tools, while num_write is free: many write counts
    # cannot be made with one or two tools
    dirs = [d.model_copy(update={"preferred_values": {**d.preferred_values, "distinct_tools": ["1-2"]}})
            for d in EmbeddedDesigner(rules).design(sp, ColdStart(), 80, run_id="t", round=3, seed=0)]
    gen, planner = EmbeddedGenerator(airline), EmbeddedPlanner(rules=rules)
    plain = [bp for bp in _blueprints(planner, dirs, sp) if bp is not None]
    probed = _blueprints(planner, dirs, sp, feasible=gen.realizable)
    refused = _infeasible(gen, sp, plain)
    assert refused >= 10  # without asking, the budget goes to tasks that are never built
    kept = [bp for bp in probed if bp is not None]
    # every blueprint is still planned (a direction with no buildable sample plans one as before: the generator
    # records why), and the generator refuses almost none
    assert len(kept) == len(probed) and _infeasible(gen, sp, kept) <= refused // 10
    # a blueprint whose first sample the generator could build is the blueprint planned without asking
    before = {bp.blueprint_id: bp for bp in plain}
    same = [bp for bp in kept if gen.realizable(before[bp.blueprint_id].selected_dimensions, bp.blueprint_id, 3)
            is None] if all(bp.blueprint_id in before for bp in kept) else []
    assert same and all(bp == before[bp.blueprint_id] for bp in same)


def test_without_a_refusal_the_blueprints_are_unchanged(space, rules, airline):
    dirs = EmbeddedDesigner(rules).design(space, ColdStart(), 40, run_id="t", round=1, seed=0)
    gen, planner = EmbeddedGenerator(airline), EmbeddedPlanner(rules=rules)
    assert _blueprints(planner, dirs, space) == _blueprints(planner, dirs, space, feasible=gen.realizable)
