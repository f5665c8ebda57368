"""The contracts between stages: one pydantic model per artifact of DESIGN.md.

Every record carries the lineage ids (run, round, space version, direction,
blueprint) so any row can be traced back to the decision that produced it.
Each record class maps to one Parquet table (see ``TABLES``); its Arrow schema
is derived in ``evosyn.storage.arrow`` and is stable across runs.
"""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from evosyn.storage.audit_records import DedupCheck, LLMCall
from evosyn.storage.canonical import JSONObject, UTCDatetime
from evosyn.storage.contracts import OBSERVED_FACTORS, Contract, Record, utcnow

# ---------------------------------------------------------------- run
Arm = Literal["evosyn", "static", "no_feedback", "no_reflector", "no_designer", "single_agent"]
PROBING_ARMS = frozenset({"evosyn", "no_designer"})  # their Reflector reads learner evidence, and a probe set


class Run(Record):
    """One closed-loop run (`evosyn run`, each run of a sweep): its config and status (``running``, ``finished``,
    ``failed``). Synthesis passes and the fixed test sets have run ids too, in the other tables."""

    table: ClassVar[str] = "runs"

    domain: str
    arm: Arm = "evosyn"
    backend: Literal["embedded", "llm"] = "embedded"
    seed: int = 0
    rounds: int = Field(ge=1)
    budget: int = Field(ge=1)
    config_json: str = "{}"
    status: Literal["running", "finished", "failed"] = "running"
    created_at: UTCDatetime = Field(default_factory=utcnow)


# ---------------------------------------------------------------- synthesis space
FactorStatus = Literal["seed", "experimental", "standard", "deprecated"]


class Cardinality(Contract):
    """How many values of a factor one blueprint selects (inclusive bounds)."""

    min: int = Field(default=1, ge=0)
    max: int = Field(default=1, ge=1)


class Baseline(Contract):
    """The learner's success on the values a factor was added for, measured when the Reflector added it: its later
    reviews (App. D ``dimension_reviews``) compare the learner's success on those values with it."""

    values: list[str] = Field(default_factory=list)  # the values that failed more than the factor's others
    tasks: int = Field(default=0, ge=0)  # diagnostic (and probe-set) tasks on those values
    successes: int = Field(default=0, ge=0)
    round: int = 0  # the round whose learner was measured


class Factor(Contract):
    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    values: list[str] = Field(min_length=1)
    guidance: str = ""
    status: FactorStatus = "seed"
    cardinality: Cardinality = Field(default_factory=Cardinality)
    observable: bool = False  # the verifier can measure it on a trajectory
    added_in: int = 1
    baseline: Baseline | None = None  # a factor the Reflector added: what its reviews compare with


class SpaceChange(Contract):
    kind: Literal["add_factor", "add_value", "promote", "keep_experimental", "deprecate"]
    factor: str
    values: list[str] = Field(default_factory=list)
    reason: str = ""
    evidence: str = ""


class SynthesisSpace(Record):
    """One immutable version of the synthesis space (ontology) of a domain."""

    table: ClassVar[str] = "spaces"

    domain: str
    version: int = Field(ge=1)
    parent_version: int | None = None
    factors: list[Factor]
    diff: list[SpaceChange] = Field(default_factory=list)
    restrictions: dict[str, list[str]] = Field(default_factory=dict)
    created_at: UTCDatetime = Field(default_factory=utcnow)

    def factor(self, key: str) -> Factor:
        for f in self.factors:
            if f.key == key:
                return f
        known = ", ".join(f.key for f in self.factors)
        raise KeyError(f"factor {key!r} is not in space v{self.version} (known: {known})")

    @property
    def active(self) -> list[Factor]:
        return [f for f in self.factors if f.status != "deprecated"]


# ---------------------------------------------------------------- design and plan
ObjectiveType = Literal["undercovered", "over_mastered", "failure_targeted", "exploration", "repair"]
BudgetLevel = Literal["zero", "low", "medium", "high", "explore"]


class Direction(Record):
    """A Designer condition: a controllable region of the space plus budget (App. D)."""

    table: ClassVar[str] = "directions"

    condition_id: str
    objective_type: ObjectiveType
    objective: str
    preferred_values: dict[str, list[str]] = Field(default_factory=dict)
    allowed_values: dict[str, list[str]] = Field(default_factory=dict)
    forbidden_values: dict[str, list[str]] = Field(default_factory=dict)
    avoid_patterns: list[str] = Field(default_factory=list)
    budget_level: BudgetLevel
    n_blueprints: int = Field(default=0, ge=0)
    rationale: str = ""
    steering: Literal["cold_start", "learner_feedback", "new_factor", "none"] = "cold_start"


class DifficultyControls(Contract):
    expected_tool_calls: str
    num_policy_constraints: str
    num_entities: str
    requires_clarification: bool
    allows_user_false_claim: bool
    requires_state_change: bool


class Blueprint(Record):
    """A Planner output: one task type grounded in the space (App. D)."""

    table: ClassVar[str] = "blueprints"

    plan_id: str
    domain: str
    selected_dimensions: dict[str, list[str]]
    generation_intent: str
    success_focus: list[str] = Field(default_factory=list)
    diversity_notes: list[str] = Field(default_factory=list)
    expected_difficulty_controls: DifficultyControls
    seed: int = 0


# ---------------------------------------------------------------- tasks and trajectories
class SynthTask(Record):
    """An executable task: its environment family's own task (as JSON) plus requested factor values."""

    table: ClassVar[str] = "tasks"

    task_id: str
    domain: str
    tau2_task: JSONObject = Field(
        description="the family's task as `evosyn.envs.base.EnvTask.to_json` gives it, for every family; read it "
                    "as `definition`. The column keeps the name it had when tau2 was the only family, since "
                    "renaming it would change the table's schema (and every store's schema files)")
    requested: dict[str, list[str]] = Field(default_factory=dict)
    scenario: JSONObject = Field(default_factory=dict, description="structured user scenario (embedded user)")
    generator: str = "embedded"
    source: Literal["synthesized", "official", "test_set"] = "synthesized"
    gold_digest: str = Field(
        default="",
        description="state digest after the gold actions, `<digest scheme>:<hex>` (envs.replay.gold_digest), "
                    "taken when the task is made so verifiers skip the gold replay; empty (rows from before it "
                    "existed): replay instead")

    @property
    def definition(self) -> dict:
        """The family's own task JSON (``Domain.task_from_json`` reads it)."""
        return self.tau2_task


class ToolCall(Contract):
    id: str
    name: str
    arguments: JSONObject = Field(default_factory=dict)
    requestor: Literal["assistant", "user"] = "assistant"


class Message(Contract):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    error: bool = False  # tool observations only: the call failed inside the tool
    requestor: Literal["assistant", "user"] = "assistant"


class Trajectory(Record):
    """One conversation: the teacher's rollout, a repair, the learner's or a served agent's episode on an evaluated
    task, with every tool call and result."""

    table: ClassVar[str] = "trajectories"

    trajectory_id: str
    task_id: str
    messages: list[Message]
    producer: Literal["teacher", "repair", "learner", "gold", "llm_agent"] = "teacher"
    model_version: str = ""
    attempt: int = Field(default=0, ge=0)
    termination: str = "agent_stop"


class CheckResult(Contract):
    name: str
    passed: bool
    reason: str = ""
    skipped: bool = False


class Verdict(Record):
    """The verifier's decision on one trajectory of one task: every check with its reason, the reward, and the
    factors observed on the replay."""

    table: ClassVar[str] = "verdicts"
    sliced: ClassVar[dict[str, tuple[str, ...]]] = {"observed": OBSERVED_FACTORS}

    verdict_id: str
    task_id: str
    trajectory_id: str
    reward: float = Field(description="tau2's reward basis on the replay (1.0 or 0.0)")
    passed: bool = Field(description="every check passed: the trajectory is kept")
    checks: list[CheckResult] = Field(
        description="each check (`executable`, `replay`, `state`, `actions`, `communicate`, `policy`, `factors`) "
                    "with `passed`, `skipped` and its `reason`")
    observed: dict[str, list[str]] = Field(default_factory=dict,
                                           description="the factors observed on the replay: factor -> values")
    attempt: int = Field(default=0, ge=0)
    repair_reason: str = ""

    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed and not c.skipped]


class SFTExample(Record):
    """A verified trajectory as a training example (``train``) or held out (``diagnostic``), with the tool
    schemas."""

    table: ClassVar[str] = "sft_examples"

    example_id: str
    task_id: str
    trajectory_id: str
    split: Literal["train", "diagnostic"] = "train"
    messages: list[Message]
    tools: list[JSONObject] = Field(default_factory=list)


# ---------------------------------------------------------------- learning and feedback
class Evaluation(Record):
    """One evaluated task (and trial) of a learner on a task set: ``diagnostic``, ``test`` (official-matched),
    ``test_uniform``, ``probe``, ``official:<split>``."""

    table: ClassVar[str] = "evaluations"
    sliced: ClassVar[dict[str, tuple[str, ...]]] = {"observed": OBSERVED_FACTORS}

    evaluation_id: str
    task_id: str
    trajectory_id: str
    model_version: str
    task_set: str = Field(
        pattern=r"^(diagnostic|test|test_uniform|probe|trials-[0-9]+|official(:[A-Za-z0-9_]+)?)$",
        description="`diagnostic`; `test` (the official-matched test set); `test_uniform` (the uniform one); "
                    "`probe` (a Reflector's probe set, RunConfig.probe_size); `trials-<t>` (trial t of a served "
                    "learner's pass@k on the round's verified tasks, served.trials); `official:<split>`")
    success: bool = Field(description="the evaluated agent solved the task (every check of the verifier)")
    reward: float
    num_steps: int = 0
    observed: dict[str, list[str]] = Field(default_factory=dict)
    failed_checks: list[str] = Field(default_factory=list, description="the checks that failed")
    trial: int = Field(default=0, ge=0,
                       description="which of k trials of the same task (official splits; 0 elsewhere)")


class SliceStat(Contract):
    factor: str
    value: str
    count: int
    successes: int = 0
    success_rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    coverage: float | None = None
    delta: float | None = None


class Feedback(Record):
    """What the learner's evaluation says to the next round's Designer: success and coverage per slice."""

    table: ClassVar[str] = "feedback"

    feedback_id: str
    model_version: str
    overall_success: float
    n_evaluated: int
    performance: list[SliceStat] = Field(default_factory=list)
    coverage: list[SliceStat] = Field(default_factory=list)
    with_learner_evidence: bool = True


class ProbeBucket(Contract):
    bucket: str
    count: int
    failure_rate: float | None = None
    coverage: float = 0.0


class Probe(Record):
    """One diagnostic probe of a round: failure and coverage per bucket, CMI, permutation p-value, NMI."""

    table: ClassVar[str] = "probes"

    probe: str
    buckets: list[ProbeBucket]
    cmi_given_space: float = Field(default=0.0, description="I(Y_fail; probe | current factors), App. B.10")
    nmi_tool_tertiles: float = Field(default=0.0, description="NMI(probe, tool-count tertile), App. B.11")
    residual_cmi: float = Field(default=0.0, description="I(Y_fail; probe | tertile)")
    coverage_gap: float = 0.0
    suggested_factor: str = Field(
        default="", description="the factor the domain's generator can realize (empty when it cannot control it)")
    suggested_values: list[str] = Field(default_factory=list)
    in_space: bool = False
    p_value: float = Field(default=1.0, description="permutation test of `cmi_given_space` (failures shuffled "
                                                    "within strata)")
    support: int = Field(default=0, description="diagnostic tasks the probe measured")


class DimensionReview(Contract):
    dimension: str
    decision: Literal["promote", "keep_experimental", "deprecate"]
    reason: str = ""
    evidence: str = ""


class Proposal(Contract):
    action: Literal["no_change", "promote_probe_to_dimension", "add_value"]
    dimension_name: str = ""
    values: list[str] = Field(default_factory=list)
    reason: str = ""
    evidence: str = ""


class Reflection(Record):
    """The Reflector's decision (App. D output schema) for one round."""

    table: ClassVar[str] = "reflections"

    round_id: str
    synthesis_space_version_in: int
    synthesis_space_version_out: int
    dimension_reviews: list[DimensionReview] = Field(default_factory=list)
    new_proposals: list[Proposal] = Field(default_factory=list)
    summary: str = ""
    steering: Literal["learner_feedback", "new_factor", "none"] = "learner_feedback"


RECORD_TYPES: tuple[type[Record], ...] = (
    Run, SynthesisSpace, Direction, Blueprint, SynthTask, Trajectory, Verdict,
    SFTExample, Evaluation, Feedback, Probe, Reflection, LLMCall, DedupCheck,
)
TABLES: dict[str, type[Record]] = {cls.table: cls for cls in RECORD_TYPES}
