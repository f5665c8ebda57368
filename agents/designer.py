"""Designer: allocates the round's synthesis budget over directions in the space (§4.3, App. D).

Steering signals (one per round): a cold-start prior, learner feedback, or a
newly added factor. Every direction only names keys and values of the current
space; budget levels become blueprint counts that sum to the round budget.
"""
from __future__ import annotations

import hashlib
import random
from typing import Literal, Protocol, Union

from pydantic import BaseModel, ConfigDict, Field

from evosyn.envs.packs import PlannerRules
from evosyn.storage.records import Direction, Feedback, SliceStat, SynthesisSpace

LEVEL_WEIGHT = {"zero": 0.0, "low": 1.0, "explore": 1.5, "medium": 2.0, "high": 3.0}
PRIMARY = ("task_family", "expected_outcome")


class ColdStart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["cold_start"] = "cold_start"


class LearnerFeedback(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["learner_feedback"] = "learner_feedback"
    feedback: Feedback
    exploration_floor: float = Field(default=0.15, ge=0.0, le=1.0)
    mastered_at: float = Field(default=0.9, ge=0.0, le=1.0)


class NewFactor(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["new_factor"] = "new_factor"
    factor: str
    coverage: dict[str, int] = Field(default_factory=dict)  # verified examples per value so far


Steering = Union[ColdStart, LearnerFeedback, NewFactor]


class DesignError(ValueError):
    pass


class Designer(Protocol):
    def design(self, space: SynthesisSpace, steering: Steering, budget: int, *, run_id: str, round: int,
               seed: int) -> list[Direction]: ...


def apportion(weights: list[float], total: int) -> list[int]:
    """Largest-remainder apportionment: non-negative integers proportional to weights, summing to total."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    raw = [w * total / s for w in weights]
    counts = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (raw[i] - counts[i], weights[i], -i), reverse=True)
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _direction_id(space: SynthesisSpace, seed: int, round: int, n: int, objective: str) -> str:
    """From what the direction is (domain, seed, round, space version, its place and objective), never the run:
    arms of one seed that design the same directions (round 1) get the same ids, so the same blueprints,
    tasks and RNG streams, and the same rows."""
    key = f"{space.domain}/{seed}/{round}/v{space.version}/{n}/{objective}"
    return f"d{round}-{n:03d}-" + hashlib.sha256(key.encode()).hexdigest()[:8]


def refusable_families(rules: PlannerRules, families: list[str]) -> list[str]:
    """The families a refusal can be planned for: those whose pack's ``rules`` name a rule they can break (or a
    categorical refusal); all of them when the pack names no rule (the planner then checks none)."""
    if not rules.violable:
        return list(families)
    return [f for f in families if f in rules.violable or f in rules.no_read_refusals]


class EmbeddedDesigner:
    """Deterministic allocation from the steering statistics (no LLM). ``rules``: the domain pack's
    ``planner_rules`` (which families a cold start may plan a refusal for)."""

    def __init__(self, rules: PlannerRules):
        self.rules = rules

    def design(self, space: SynthesisSpace, steering: Steering, budget: int, *, run_id: str, round: int,
               seed: int) -> list[Direction]:
        if isinstance(steering, ColdStart):
            specs = self._cold_start(space)
        elif isinstance(steering, LearnerFeedback):
            specs = self._from_feedback(space, steering)
        elif isinstance(steering, NewFactor):
            specs = self._new_factor(space, steering)
        else:  # pragma: no cover - the Union is closed
            raise DesignError(f"unknown steering signal {steering!r}")
        counts = apportion([LEVEL_WEIGHT[s["budget_level"]] * s.get("weight", 1.0) for s in specs], budget)
        directions = []
        for n, (spec, count) in enumerate(zip(specs, counts)):
            spec.pop("weight", None)
            d = Direction(run_id=run_id, round=round, space_version=space.version,
                          direction_id=_direction_id(space, seed, round, n, spec["objective"]),
                          condition_id=f"c{n:03d}", n_blueprints=count, steering=steering.kind, **spec)
            validate_direction(space, d)
            directions.append(d)
        return directions

    # ------------------------------------------------------------ modes
    def _cold_start(self, space: SynthesisSpace) -> list[dict]:
        # every family crossed with every outcome; a space without an outcome factor (CAR-bench's) crosses the
        # families with its next factor (its task types), within the space's restrictions
        second = "expected_outcome" if any(f.key == "expected_outcome" for f in space.active) else \
            next(f.key for f in space.active if f.key != "task_family")
        family, outcome = space.factor("task_family"), space.factor(second)
        outcomes = [o for o in outcome.values if o in space.restrictions.get(second, outcome.values)]
        refusable = refusable_families(self.rules, family.values)
        return [{"objective_type": "exploration", "budget_level": "explore",
                 "objective": f"explore {f} with outcome {o}" if second == "expected_outcome"
                 else f"explore {f} with {second} {o}",
                 "allowed_values": {"task_family": [f], second: [o]},
                 "rationale": "cold start: spread the budget over every family and outcome; the Planner "
                              "balances the remaining factors"}
                for f in family.values for o in outcomes if o != "refuse" or f in refusable]

    def _from_feedback(self, space: SynthesisSpace, fb: LearnerFeedback) -> list[dict]:
        active = {f.key: f for f in space.active}
        stats: dict[tuple[str, str], SliceStat] = {(s.factor, s.value): s for s in fb.feedback.performance}
        cover: dict[tuple[str, str], SliceStat] = {(s.factor, s.value): s for s in fb.feedback.coverage}
        specs = []
        for key, factor in active.items():
            if key in ("interaction_challenge",):
                continue
            values = [v for v in factor.values if v in space.restrictions.get(key, factor.values)]  # plannable ones
            for value in values:
                perf, cov = stats.get((key, value)), cover.get((key, value))
                success = perf.success_rate if perf and perf.count else None
                share = cov.coverage if cov and cov.coverage is not None else 0.0
                expected_share = 1.0 / len(values)
                # without coverage statistics there is no evidence of a gap
                gap = max(0.0, expected_share - share) / expected_share if cover else 0.0
                if success is not None and success >= fb.mastered_at and gap < 0.5:
                    specs.append({"objective_type": "over_mastered", "budget_level": "low",
                                  "weight": fb.exploration_floor,
                                  "objective": f"keep a little practice on mastered {key}={value}",
                                  "preferred_values": {key: [value]},
                                  "rationale": f"success {success:.2f} on {perf.count} diagnostic tasks"})
                    continue
                weakness = (1.0 - success) if success is not None else 0.5
                weight = fb.exploration_floor + weakness + gap
                kind = "failure_targeted" if success is not None and weakness >= gap else "undercovered"
                specs.append({"objective_type": kind, "budget_level": "high" if weight > 1.0 else "medium",
                              "weight": weight, "objective": f"strengthen {key}={value}",
                              "allowed_values": {key: [value]},
                              "rationale": (f"success {success:.2f} on {perf.count} tasks" if success is not None
                                            else "no diagnostic evidence") + f"; coverage share {share:.2f}"})
        return specs

    def _new_factor(self, space: SynthesisSpace, nf: NewFactor) -> list[dict]:
        factor = space.factor(nf.factor)
        specs = []
        for value in factor.values:
            have = nf.coverage.get(value, 0)
            specs.append({"objective_type": "undercovered" if have == 0 else "exploration",
                          "budget_level": "high" if have == 0 else "medium",
                          "weight": 1.0 / (1.0 + have) ** 0.5,
                          "objective": f"populate the new factor {factor.key}={value}",
                          "allowed_values": {factor.key: [value]},
                          "rationale": f"newly added factor; {have} verified examples so far"})
        return specs


def validate_direction(space: SynthesisSpace, d: Direction) -> None:
    """Every key and value a direction names belongs to the current space."""
    active = {f.key: f for f in space.active}
    for field in ("preferred_values", "allowed_values", "forbidden_values"):
        for key, values in getattr(d, field).items():
            if key not in active:
                raise DesignError(f"direction {d.condition_id}: {field} names factor {key!r}, not in space "
                                  f"v{space.version} (known: {', '.join(active)})")
            bad = [v for v in values if v not in active[key].values]
            if bad:
                raise DesignError(f"direction {d.condition_id}: {field}[{key}] has values {bad} not in "
                                  f"{active[key].values}")


def shuffled(seq: list, seed: int) -> list:
    out = list(seq)
    random.Random(seed).shuffle(out)
    return out


# ------------------------------------------------------------------ LLM-backed Designer
class ConditionOut(BaseModel):
    """One direction as the model writes it (App. D output schema)."""

    model_config = ConfigDict(extra="forbid")
    condition_id: str
    objective_type: Literal["undercovered", "over_mastered", "failure_targeted", "exploration", "repair"]
    objective: str
    preferred_values: dict[str, list[str]] = Field(default_factory=dict)
    allowed_values: dict[str, list[str]] = Field(default_factory=dict)
    forbidden_values: dict[str, list[str]] = Field(default_factory=dict)
    avoid_patterns: list[str] = Field(default_factory=list)
    budget_level: Literal["zero", "low", "medium", "high", "explore"]
    rationale: str = ""


class DesignerOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    conditions: list[ConditionOut] = Field(min_length=1)


def steering_text(steering: Steering) -> object:
    if isinstance(steering, ColdStart):
        return "No learner feedback yet: explore the space broadly."
    if isinstance(steering, NewFactor):
        return {"new_factor": steering.factor, "verified_examples_per_value": steering.coverage}
    fb = steering.feedback
    return {"overall_success": round(fb.overall_success, 3), "diagnostic_tasks": fb.n_evaluated,
            "performance": [f"{s.factor}={s.value}: success {s.success_rate:.2f} on {s.count}"
                            for s in fb.performance if s.success_rate is not None],
            "coverage": [f"{s.factor}={s.value}: share {s.coverage:.2f} ({s.count} examples)"
                         for s in fb.coverage if s.coverage is not None]}


def designer_messages(space: SynthesisSpace, steering: Steering, budget: int, env: dict) -> list[dict]:
    """The Designer's chat messages (pure: same inputs, same prompt, so the response cache applies)."""
    from evosyn.agents.ask import render, space_values

    text = render("designer.md", domain=space.domain, environment=env.get("environment", {}),
                  tools=env.get("tools", []), policy=env.get("policy", ""), space=space_values(space),
                  steering_kind=steering.kind, steering=steering_text(steering), budget=str(budget))
    return [{"role": "user", "content": text}]


def pattern_problems(space: SynthesisSpace, pattern: str) -> list[str]:
    keys = {f.key: f for f in space.active}
    parts = [p.split("=", 1) for p in pattern.split("&")]
    if not parts or any(len(p) != 2 for p in parts):
        return [f"avoid pattern {pattern!r} is not of the form key=value&key=value"]
    out = []
    for k, v in parts:
        k, v = k.strip(), v.strip()
        if k not in keys:
            out.append(f"avoid pattern {pattern!r} names factor {k!r}, not in the space")
        elif v not in keys[k].values:
            out.append(f"avoid pattern {pattern!r}: {v!r} is not a value of {k}")
    return out


def parse_designer(out: DesignerOut, space: SynthesisSpace, steering: Steering, budget: int, *, run_id: str,
                   round: int, seed: int = 0) -> list[Direction]:
    """Directions from the model's conditions; ``Invalid`` names the first rule a condition breaks."""
    from evosyn.agents.ask import Invalid

    ids = [c.condition_id for c in out.conditions]
    if len(set(ids)) != len(ids):
        raise Invalid(f"condition_id values must be unique, got {ids}")
    if all(c.budget_level == "zero" for c in out.conditions):
        raise Invalid("every condition has budget_level zero; at least one must receive budget")
    active = {f.key: f for f in space.active}
    specs = []
    for c in out.conditions:
        spec = c.model_dump()
        d = Direction(run_id=run_id, round=round, space_version=space.version, direction_id="x", **spec)
        try:
            validate_direction(space, d)
        except DesignError as exc:
            raise Invalid(str(exc)) from None
        for key, f in active.items():
            left = [v for v in (c.allowed_values.get(key) or f.values) if v not in c.forbidden_values.get(key, [])]
            if f.cardinality.min > 0 and not left:
                raise Invalid(f"condition {c.condition_id}: allowed minus forbidden leaves no value of {key}, "
                              f"which needs at least {f.cardinality.min}")
            clash = set(c.preferred_values.get(key, [])) & set(c.forbidden_values.get(key, []))
            if clash:
                raise Invalid(f"condition {c.condition_id}: {key} values {sorted(clash)} are both preferred and "
                              f"forbidden")
        for p in c.avoid_patterns:
            problems = pattern_problems(space, p)
            if problems:
                raise Invalid(f"condition {c.condition_id}: {problems[0]}")
        specs.append(spec)
    if isinstance(steering, NewFactor) and not any(
            steering.factor in c.allowed_values or steering.factor in c.preferred_values for c in out.conditions):
        raise Invalid(f"the new factor {steering.factor!r} must be named (allowed or preferred values) by at least "
                      f"one condition")
    counts = apportion([LEVEL_WEIGHT[s["budget_level"]] for s in specs], budget)
    return [Direction(run_id=run_id, round=round, space_version=space.version,
                      direction_id=_direction_id(space, seed, round, n, spec["objective"]),
                      n_blueprints=count, steering=steering.kind,
                      **{**spec, "condition_id": f"c{n:03d}"})
            for n, (spec, count) in enumerate(zip(specs, counts))]


class LLMDesigner:
    """The Designer as an LLM: the prompt carries the space, the steering signal and the environment."""

    def __init__(self, client, env: dict, retries: int = 2):
        self.client, self.env, self.retries = client, env, retries
        self.raw = ""  # the latest raw reply, kept beside the parsed directions

    def design(self, space: SynthesisSpace, steering: Steering, budget: int, *, run_id: str, round: int,
               seed: int) -> list[Direction]:
        from evosyn.agents.ask import RoleRejected, ask

        try:
            ans = ask(self.client, designer_messages(space, steering, budget, self.env), schema=DesignerOut,
                      role="designer", retries=self.retries,
                      validate=lambda out: parse_designer(out, space, steering, budget, run_id=run_id, round=round,
                                                                  seed=seed))
        except RoleRejected as exc:
            raise DesignError(str(exc)) from None
        self.raw = ans.raw
        return ans.value
