"""Planner: grounds one direction into a blueprint of compatible factor values (App. D)."""
from __future__ import annotations

import hashlib
import random
from typing import Callable, Protocol, Union

from pydantic import BaseModel, ConfigDict, Field

from evosyn.agents.designer import DesignError
from evosyn.agents.plans import BUCKET_RANGE
from evosyn.envs.base import EnvSummary
from evosyn.envs.ontology import check_selection
from evosyn.envs.packs import PlannerRules
from evosyn.envs.properties import min_writes
from evosyn.storage.records import Blueprint, DifficultyControls, Direction, SynthesisSpace

ORDER = ("task_family", "expected_outcome", "num_write", "num_read", "difficulty_profile")
CALLS = {"easy": "2-3", "medium": "4-5", "hard": "6+"}

# Compatibility rules (the domain pack's ``planner_rules``): a refusal must name a policy
# focus the request can violate; a refusal changes no state (num_write 0) and a state
# change is a fulfilment; a task with no reads is a categorical refusal; a fulfilment
# without writes is an information request; a refusal that needs more lookups than the
# read count allows is planned as another family.


class PlanError(ValueError):
    """The direction cannot be grounded into a compatible blueprint."""


# why the generator cannot realize a selection as a blueprint id under a seed (None: it can)
Feasible = Callable[[dict[str, list[str]], str, int], Union[str, None]]


class Planner(Protocol):
    def plan(self, direction: Direction, space: SynthesisSpace, env: EnvSummary | None, *, index: int,
             seed: int, feasible: Feasible | None = None) -> Blueprint: ...


def _allowed(space: SynthesisSpace, direction: Direction, key: str) -> list[str]:
    factor = space.factor(key)
    values = direction.allowed_values.get(key) or factor.values
    values = [v for v in values if v not in direction.forbidden_values.get(key, [])]
    if key in space.restrictions:
        values = [v for v in values if v in space.restrictions[key]]
    return values


def _matches(pattern: str, sel: dict[str, list[str]]) -> bool:
    """An avoid-pattern 'k=v&k2=v2' matches when every listed value is selected."""
    parts = [p.split("=", 1) for p in pattern.split("&") if "=" in p]
    return bool(parts) and all(v.strip() in sel.get(k.strip(), []) for k, v in parts)


def _fulfil_reads(rules, sel: dict[str, list[str]]) -> int:
    """The fewest reads a fulfilment of this selection needs under the pack's rules (0: no rule)."""
    base = rules.min_fulfil_reads.get(sel["task_family"][0], 0)
    writes = BUCKET_RANGE.get((sel.get("num_write") or ["1"])[0], (1, 1))[0]
    return base + rules.reads_per_extra_write * max(0, writes - 1) if base else 0


def blueprint_id(direction: Direction, digest: str) -> str:
    return f"b{direction.round}-{digest}"


class EmbeddedPlanner:
    """``rules``: the domain pack's ``planner_rules`` (``evosyn.agents.roles.build_roles`` passes its domain's)."""

    def __init__(self, soft_preference: float = 0.8, tries: int = 30, *, rules: PlannerRules):
        self.soft_preference = soft_preference
        self.tries = tries
        self.rules = rules

    def plan(self, direction: Direction, space: SynthesisSpace, env: EnvSummary | None, *, index: int,
             seed: int, feasible: Feasible | None = None) -> Blueprint:
        """``feasible``: the generator's own test of a selection (``EmbeddedGenerator.realizable``); a sample it
        cannot realize is drawn again, so the budget goes to combinations that become tasks. It consumes none of
        the planner's random draws: where every first sample is realizable, the blueprints are those without it.
        Where no sample is, the first compatible one is planned as it would be without asking (every direction
        spends its budget; the generator's rejection says why)."""
        for key in (*direction.allowed_values, *direction.preferred_values, *direction.forbidden_values):
            space.factor(key)  # raises KeyError naming the known factors
        digest = hashlib.sha256(f"{direction.direction_id}/{index}/{seed}".encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        last = "no attempt"
        unbuildable = None  # the first compatible sample the generator refused: planned when no sample is buildable
        for _ in range(self.tries):
            sel = self._sample(direction, space, rng)
            try:
                self._make_compatible(sel, direction, space, rng)
            except PlanError as exc:
                last = str(exc)
                continue
            if any(_matches(p, sel) for p in direction.avoid_patterns):
                last = "every sample hit an avoid-pattern"
                continue
            problems = check_selection(space, sel)
            if problems:
                last = "; ".join(problems)
                continue
            why = feasible(sel, blueprint_id(direction, digest[:10]), seed) if feasible is not None else None
            if why:
                unbuildable = unbuildable or sel
                continue
            return self._blueprint(direction, space, sel, digest[:10], seed)
        if unbuildable is not None:  # as without asking: the blueprint is spent, and the generator records why
            return self._blueprint(direction, space, unbuildable, digest[:10], seed)
        raise PlanError(f"direction {direction.condition_id}: no compatible blueprint ({last})")

    def _sample(self, direction: Direction, space: SynthesisSpace, rng: random.Random) -> dict[str, list[str]]:
        sel: dict[str, list[str]] = {}
        keys = sorted((f.key for f in space.active), key=lambda k: ORDER.index(k) if k in ORDER else len(ORDER))
        for key in keys:
            factor = space.factor(key)
            allowed = _allowed(space, direction, key)
            if not allowed:
                if factor.cardinality.min == 0:
                    sel[key] = []
                    continue
                raise DesignError(f"direction {direction.condition_id}: nothing left to choose for {key}")
            k = rng.randint(factor.cardinality.min, min(factor.cardinality.max, len(allowed)))
            preferred = [v for v in direction.preferred_values.get(key, []) if v in allowed]
            chosen: list[str] = []
            while len(chosen) < k:
                pool = [v for v in (preferred if preferred and rng.random() < self.soft_preference else allowed)
                        if v not in chosen] or [v for v in allowed if v not in chosen]
                chosen.append(rng.choice(pool))
            sel[key] = chosen
        return sel

    def _make_compatible(self, sel, direction, space, rng) -> None:
        keys = {f.key for f in space.active}
        hard = direction.allowed_values
        rules = self.rules

        def force(key: str, options: list[str]) -> None:
            allowed = [v for v in options if v in _allowed(space, direction, key)]
            if not allowed:
                raise PlanError(f"{key} must be one of {options} here, but the direction excludes them")
            if sel[key] and sel[key][0] in allowed:
                return
            sel[key] = [rng.choice(allowed)]

        for cause, wants in rules.implies.items():  # the pack's value-implies-values rules, in their order
            if implied(cause, sel):
                for other, options in wants.items():
                    if other in keys:
                        force(other, options)
        if "expected_outcome" not in keys:  # the rules below relate the outcome to the counts and the focus
            return
        need = min_writes({k: v for k, v in sel.items() if k != "num_write"})
        if need:  # a property value that only writes can show (a multi-item write, a mixed pair of writes, ...)
            force("expected_outcome", ["fulfill"])
            if "num_write" in keys:
                force("num_write", [b for b, (least, _) in BUCKET_RANGE.items() if least >= need])
            if "num_read" in keys and sel["num_read"] == ["0"]:
                force("num_read", [b for b in BUCKET_RANGE if b != "0"])
        if "num_read" in keys and sel["num_read"] == ["0"]:
            force("num_write", ["0"]) if "num_write" in keys else None
            force("expected_outcome", ["refuse"])
            force("task_family", rules.no_read_refusals)
        if "num_write" in keys:
            if sel["expected_outcome"] == ["refuse"] and sel["num_write"] != ["0"]:
                if "expected_outcome" in hard and "num_write" in hard:
                    raise PlanError("a refusal changes no state, but num_write is constrained above 0")
                if "num_write" in hard or "expected_outcome" not in hard:
                    force("expected_outcome", ["fulfill"])
                else:
                    force("num_write", ["0"])
            if sel["expected_outcome"] == ["fulfill"] and sel["num_write"] == ["0"]:
                force("task_family", rules.info_families)
        if "num_read" in keys and sel["num_read"] and sel["expected_outcome"] == ["fulfill"]:
            need = _fulfil_reads(rules, sel)
            if need and BUCKET_RANGE.get(sel["num_read"][0], (0, need))[1] < need:
                force("num_read", [b for b, (_, most) in BUCKET_RANGE.items() if most >= need])
        if "num_read" in keys and sel["num_read"] and sel["expected_outcome"] == ["refuse"]:
            most = BUCKET_RANGE[sel["num_read"][0]][1] if sel["num_read"][0] in BUCKET_RANGE else None
            if most and any(need > most for need in rules.min_refusal_reads.values()):
                force("task_family", [f for f in rules.violable if rules.min_refusal_reads.get(f, 0) <= most])
        if sel["expected_outcome"] == ["refuse"] and rules.violable and "task_family" in keys:
            # a refusal must break a rule: a family with no rule to break (and no categorical refusal) cannot
            # be refused, so the generator could only reject it
            force("task_family", [*rules.violable, *rules.no_read_refusals])
        if sel["expected_outcome"] == ["refuse"]:
            violable = rules.violable.get(sel["task_family"][0])
            if violable and not set(sel["policy_or_constraint_focus"]) & set(violable):
                sel["policy_or_constraint_focus"] = [rng.choice(violable)]

    def _blueprint(self, direction, space, sel, digest, seed) -> Blueprint:
        # a space without an outcome or a policy-focus factor (CAR-bench's) reads as a fulfilment with no focus
        family, outcome = sel["task_family"][0], (sel.get("expected_outcome") or ["fulfill"])[0]
        focus = sel.get("policy_or_constraint_focus", [])
        difficulty = sel["difficulty_profile"][0]
        writes = sel.get("num_write", ["prior"])[0]
        controls = DifficultyControls(
            expected_tool_calls=CALLS[difficulty], num_policy_constraints=str(len(focus)),
            num_entities="1-3", requires_clarification="missing_information" in sel.get("interaction_challenge", []),
            allows_user_false_claim="user_false_claim" in sel.get("interaction_challenge", []),
            requires_state_change=outcome == "fulfill" and writes != "0")
        verb = "carry out" if outcome == "fulfill" else "recognise the policy violation in and decline"
        return Blueprint(
            run_id=direction.run_id, round=direction.round, space_version=space.version,
            direction_id=direction.direction_id, blueprint_id=blueprint_id(direction, digest),
            plan_id=f"p-{digest}", domain=space.domain, selected_dimensions=sel, seed=seed,
            generation_intent=f"a {difficulty} {family.replace('_', ' ')} request the agent must {verb}",
            success_focus=[f"respect {f.replace('_', ' ')}" for f in focus],
            diversity_notes=[f"patterns: {', '.join(sel.get('tool_use_pattern', []))}",
                             f"challenges: {', '.join(sel.get('interaction_challenge', [])) or 'none'}"],
            expected_difficulty_controls=controls)


# ------------------------------------------------------------------ LLM-backed Planner
class PlannerOut(BaseModel):
    """One blueprint as the model writes it (App. D output schema)."""

    model_config = ConfigDict(extra="forbid")
    domain: str
    plan_id: str = ""
    selected_dimensions: dict[str, Union[str, list[str]]]
    generation_intent: str = Field(min_length=1)
    success_focus: list[str] = Field(default_factory=list)
    diversity_notes: list[str] = Field(default_factory=list)
    expected_difficulty_controls: DifficultyControls


def direction_view(d: Direction) -> dict:
    return {"objective_type": d.objective_type, "objective": d.objective, "preferred_values": d.preferred_values,
            "allowed_values": d.allowed_values, "forbidden_values": d.forbidden_values,
            "avoid_patterns": d.avoid_patterns, "rationale": d.rationale}


def planner_messages(direction: Direction, space: SynthesisSpace, env: dict, *, index: int, seed: int) -> list[dict]:
    from evosyn.agents.ask import render, space_values

    # the variation key makes the n prompts of one direction distinct (and so their cache keys)
    text = render("planner.md", domain=space.domain, environment=env.get("environment", {}),
                  tools=env.get("tools", []), policy=env.get("policy", ""), space=space_values(space),
                  direction=direction_view(direction), index=str(index + 1), count=str(max(1, direction.n_blueprints)),
                  variation=f"{seed}-{index}")
    return [{"role": "user", "content": text}]


def implied(cause: str, sel: dict[str, list[str]]) -> bool:
    """Whether a selection meets a rule's cause: ``factor=value``, or several joined by ``&`` (all of them)."""
    return all(value in sel.get(key, []) for key, _, value in (part.partition("=") for part in cause.split("&")))


def compatibility_problems(sel: dict[str, list[str]], rules: PlannerRules) -> list[str]:
    """The domain's compatibility rules the embedded planner enforces, as checks on a finished selection."""
    one = lambda k: sel[k][0] if sel.get(k) else None  # noqa: E731
    violable, no_read, info = rules.violable, rules.no_read_refusals, rules.info_families
    family, outcome, writes, reads = one("task_family"), one("expected_outcome"), one("num_write"), one("num_read")
    out = []
    for cause, wants in rules.implies.items():  # the pack's value-implies-values rules
        if implied(cause, sel):
            out += [f"{cause} goes with {other} in {options} (got {sel[other]})" for other, options in wants.items()
                    if sel.get(other) and not set(sel[other]) & set(options)]
    if outcome is None:  # the rules below relate a tau2-style outcome to the counts and the focus
        return out
    if outcome == "refuse" and writes not in (None, "0"):
        out.append(f"a refusal changes no state, so num_write must be 0 (got {writes})")
    if reads == "0" and (outcome != "refuse" or family not in no_read):
        out.append(f"a task without lookups (num_read 0) must be a refusal of {no_read}")
    if outcome == "fulfill" and writes == "0" and family not in info:
        out.append(f"a fulfilment without writes is an information request: task_family must be one of "
                   f"{info}")
    if outcome == "refuse" and violable and family not in violable and family not in no_read:
        out.append(f"a refusal must break a rule, and {family} has none to break: task_family must be one of "
                   f"{sorted({*violable, *no_read})}")
    if outcome == "refuse" and family in violable and not set(sel.get("policy_or_constraint_focus", [])) & set(
            violable[family]):
        out.append(f"a refused {family} must focus on a rule it can break: one of {violable[family]}")
    return out


def parse_planner(out: PlannerOut, direction: Direction, space: SynthesisSpace, *, index: int, seed: int,
                  rules: PlannerRules) -> Blueprint:
    """The blueprint of the model's selection, checked against the space, the direction and the domain pack's
    ``rules``; ``Invalid`` names every problem."""
    from evosyn.agents.ask import Invalid

    if out.domain != space.domain:
        raise Invalid(f"domain must be {space.domain!r}, got {out.domain!r}")
    sel = {k: [v] if isinstance(v, str) else list(v) for k, v in out.selected_dimensions.items()}
    problems = check_selection(space, sel)
    for key, values in direction.allowed_values.items():
        bad = [v for v in sel.get(key, []) if v not in values]
        if bad:
            problems.append(f"the direction allows only {values} for {key}, got {bad}")
    for key, values in direction.forbidden_values.items():
        bad = [v for v in sel.get(key, []) if v in values]
        if bad:
            problems.append(f"the direction forbids {bad} for {key}")
    problems += [f"the selection matches the avoid pattern {p!r}" for p in direction.avoid_patterns if _matches(p, sel)]
    if rules.defined and not problems:
        problems += compatibility_problems(sel, rules)
    if problems:
        raise Invalid("; ".join(problems))
    digest = hashlib.sha256(f"{direction.direction_id}/{index}/{seed}/llm".encode()).hexdigest()
    return Blueprint(run_id=direction.run_id, round=direction.round, space_version=space.version,
                     direction_id=direction.direction_id, blueprint_id=f"b{direction.round}-{digest[:10]}",
                     plan_id=f"p-{digest[:10]}", domain=space.domain, selected_dimensions=sel, seed=seed,
                     generation_intent=out.generation_intent, success_focus=out.success_focus,
                     diversity_notes=out.diversity_notes, expected_difficulty_controls=out.expected_difficulty_controls)


class LLMPlanner:
    """``rules``: the domain pack's ``planner_rules``, checked on every selection the model makes."""

    def __init__(self, client, env: dict, retries: int = 2, *, rules: PlannerRules):
        self.client, self.env, self.retries, self.rules = client, env, retries, rules
        self.raw: dict[str, str] = {}  # blueprint id -> raw reply

    def plan(self, direction: Direction, space: SynthesisSpace, env: EnvSummary | None, *, index: int,
             seed: int, feasible: Feasible | None = None) -> Blueprint:
        """``feasible``: as for ``EmbeddedPlanner.plan``; a selection the generator cannot realize is sent back to
        the model with the generator's reason, within the role's retries."""
        from evosyn.agents.ask import Invalid, RoleRejected, ask

        def validate(out: PlannerOut) -> Blueprint:
            bp = parse_planner(out, direction, space, index=index, seed=seed, rules=self.rules)
            why = feasible(bp.selected_dimensions, bp.blueprint_id, seed) if feasible is not None else None
            if why:
                raise Invalid(f"the generator cannot realize this selection ({why}); choose other values")
            return bp

        try:
            ans = ask(self.client, planner_messages(direction, space, self.env, index=index, seed=seed),
                      schema=PlannerOut, role="planner", retries=self.retries, validate=validate)
        except RoleRejected as exc:
            raise PlanError(f"direction {direction.condition_id}: {exc}") from None
        self.raw[ans.value.blueprint_id] = ans.raw
        return ans.value
