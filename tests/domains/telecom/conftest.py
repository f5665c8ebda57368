"""Fixtures for the telecom pack: the real tau2 telecom environment, built by the pack (not the registry's shared one)."""
from __future__ import annotations

from tests.domains.conftest import pack_fixtures

FAMILIES = ["plan_change", "billing_issue", "device_upgrade", "line_management", "service_troubleshooting",
            "account_profile_update"]


telecom, generator = pack_fixtures("telecom", "telecom")


def selection(family: str, outcome: str, writes: str | None = None, reads: str | None = None,
              challenges: list[str] | None = None) -> dict[str, list[str]]:
    sel = {"task_family": [family], "expected_outcome": [outcome], "difficulty_profile": ["medium"],
           "interaction_challenge": challenges or []}
    if writes is not None:
        sel["num_write"] = [writes]
    if reads is not None:
        sel["num_read"] = [reads]
    return sel


def synth_task(plan, sel, task_id: str = "syn-telecom"):
    """A ``SynthTask`` from a plan, through the core's own task draft and the tau2 family's task."""
    from evosyn.agents.generator import scenario_of, task_draft
    from evosyn.envs.packs import get_domain, get_pack
    from evosyn.storage.records import Blueprint, DifficultyControls, SynthTask

    bp = Blueprint(run_id="t", round=0, blueprint_id="bp", plan_id="p", domain="telecom", selected_dimensions=sel,
                   generation_intent="test", seed=0,
                   expected_difficulty_controls=DifficultyControls(
                       expected_tool_calls="4-5", num_policy_constraints="1", num_entities="1",
                       requires_clarification=False, allows_user_false_claim=False, requires_state_change=True))
    task = get_domain("telecom").make_task(task_draft(task_id, bp, plan, get_pack("telecom").phrasing))
    return SynthTask(run_id="t", round=0, task_id=task_id, domain="telecom", tau2_task=task.to_json(), requested=sel,
                     scenario=scenario_of(plan, bp))
