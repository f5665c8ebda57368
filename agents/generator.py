"""Generator: turns a blueprint into an executable ``SynthTask`` (a tau2 Task + requested values)."""
from __future__ import annotations

import hashlib
from typing import Protocol

from agents.embedded.airline_generator import AirlineGenerator, DefaultPrior, Infeasible, Plan
from envs.base import Domain
from envs.ontology import check_selection
from envs.tau2.convert import task_from_dict
from storage.records import Blueprint, SynthesisSpace, SynthTask

CHALLENGE_TEXT = {
    "missing_information": "Do not give your user id in your first message; give it when asked.",
    "ambiguous_preference": "Start vaguely ('one of my bookings'); be precise only when asked.",
    "ambiguous_request": "Start vaguely; be precise only when asked.",
    "user_false_claim": "Claim that a previous agent already promised you this.",
    "preference_change": "When first asked to confirm, hesitate and ask to hear the details again; then agree.",
    "emotional_pressure": "Sound stressed and in a hurry.",
    "multi_intent_interleaving": "Bring up each further request only after the previous one is done.",
    "constraint_hidden_until_late": "Mention your payment preference only when asked to confirm.",
}


class GenerationError(ValueError):
    """A blueprint that cannot become a task: recorded as a rejection, never kept."""


class Generator(Protocol):
    def generate(self, blueprint: Blueprint, space: SynthesisSpace) -> SynthTask: ...


class EmbeddedGenerator:
    """Deterministic, seeded task construction over the real environment DB (airline)."""

    def __init__(self, domain: Domain, prior: DefaultPrior | None = None):
        if domain.name != "airline":
            raise GenerationError(f"the embedded generator supports airline only, not {domain.name!r}")
        self.domain = domain
        self.airline = AirlineGenerator(domain, prior or DefaultPrior())

    def generate(self, blueprint: Blueprint, space: SynthesisSpace) -> SynthTask:
        problems = check_selection(space, blueprint.selected_dimensions)
        if problems:
            raise GenerationError("blueprint outside the space: " + "; ".join(problems))
        try:
            plan = self.airline.plan(blueprint.selected_dimensions, blueprint.blueprint_id, blueprint.seed)
        except Infeasible as exc:
            raise GenerationError(f"infeasible: {exc}") from None
        task_id = "syn-" + hashlib.sha256(f"{blueprint.blueprint_id}/{blueprint.seed}".encode()).hexdigest()[:12]
        tau2_task = build_tau2_task(task_id, blueprint, plan)
        task_from_dict(tau2_task)  # must be a valid tau2 Task
        return SynthTask(run_id=blueprint.run_id, round=blueprint.round, space_version=blueprint.space_version,
                         direction_id=blueprint.direction_id, blueprint_id=blueprint.blueprint_id, task_id=task_id,
                         domain=blueprint.domain, tau2_task=tau2_task, requested=blueprint.selected_dimensions,
                         scenario=scenario_of(plan, blueprint), generator="embedded")


def scenario_of(plan: Plan, blueprint: Blueprint) -> dict:
    return {"user_id": plan.user_id, "intents": plan.intents, "fillers": plan.fillers,
            "challenges": blueprint.selected_dimensions.get("interaction_challenge", []),
            "refusal": plan.refusal, "info": plan.info}


def build_tau2_task(task_id: str, blueprint: Blueprint, plan: Plan) -> dict:
    sel = blueprint.selected_dimensions
    asks = [i["say"] for i in plan.intents]
    if plan.fillers:
        asks = [f"first, {'; '.join(plan.fillers)}"] + asks
    challenges = sel.get("interaction_challenge", [])
    instructions = [CHALLENGE_TEXT[c] for c in challenges if c in CHALLENGE_TEXT]
    if plan.refusal:
        instructions.append("If the agent explains that this is not allowed, accept it and end the call.")
    else:
        instructions.append("Confirm each change with 'yes' when the agent describes it.")
    return {
        "id": task_id,
        "description": {"purpose": blueprint.generation_intent,
                        "relevant_policies": ", ".join(sel.get("policy_or_constraint_focus", [])),
                        "notes": f"EvoSyn embedded generator; blueprint {blueprint.blueprint_id}"},
        "user_scenario": {"instructions": {
            "domain": blueprint.domain,
            "reason_for_call": "You want to " + "; then ".join(asks) + ".",
            "known_info": f"Your user id is {plan.user_id}.",
            "unknown_info": "You do not know the airline's internal rules.",
            "task_instructions": " ".join(instructions)}},
        "ticket": "Customer " + plan.user_id + " wants to " + "; then ".join(asks) + ".",
        "evaluation_criteria": {
            "actions": [{"action_id": f"{task_id}-{n}", "requestor": "assistant", "name": name, "arguments": args}
                        for n, (name, args) in enumerate(plan.actions)],
            "communicate_info": plan.info,
            "reward_basis": ["DB", "COMMUNICATE"]},
    }
