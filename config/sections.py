"""The run configuration's sections: the store, tau2's official split, the LLaMA-Factory learner, the embedded
generator's prior and the dedup stage."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from evosyn.config.base import Section
from evosyn.config.roles import RoleConfig


class StoreConfig(Section):
    """Where the run's store is, and where MLflow logs."""

    root: str | None = Field(
        default=None,
        description="the store root: a folder, or `s3://bucket/prefix` on object storage (guides/store-on-s3); "
                    "unset: `EVOSYN_HOME`, else `./.evosyn`")
    tracking_uri: str | None = Field(
        default=None, description="an MLflow tracking URI (unset: the store's own `mlflow.db`)")


class OfficialEvalConfig(Section):
    """At the end of each round, the round's learner on a split of tau2's official tasks (tasks/official.py)."""

    split: str = Field(
        default="test", pattern=r"^[A-Za-z0-9_]+$",
        description="a split of the domain's official tasks (`train`, `test`, `base`, ...); the config cannot see "
                    "the domains, so the name is checked against the domain before any work")
    trials: int = Field(default=1, ge=1, le=64, description="trials of each task: the k of pass^k")
    max_tasks: int | None = Field(
        default=None, ge=1, le=100_000,
        description="the split's first N tasks (unset: every task; splits hold hundreds)")
    max_steps: int = Field(default=40, ge=1, le=500, description="agent replies per task and trial")
    user: RoleConfig = Field(
        default_factory=RoleConfig,
        description="the simulated user: embedded (scripted) unless `backend: llm`")
    tasks_path: str | None = Field(
        default=None,
        description="the official tasks of this tau2 data folder (e.g. a tau2-bench v1.0.1 checkout) instead of the "
                    "installed package's, some of which predate v1.0's task fixes (guides/official-tasks)")


class LlamaFactoryConfig(Section):
    """``learner: llamafactory``: what each round trains, and how its checkpoint is served for evaluation."""

    model: str = Field(default="Qwen/Qwen3-8B",
                       description="the base model: a folder (or hub name) the training machine has")
    template: str = Field(default="qwen3",
                          description="LLaMA-Factory's chat template, in training and in `llamafactory-cli api`")
    deepspeed: bool = Field(default=True,
                            description="ZeRO-3 (agents/learners/ds_z3_config.json), as the paper trains")
    recipe: dict[str, Any] = Field(
        default_factory=dict,
        description="keys of the paper's recipe to override, e.g. `{max_steps: 3, bf16: false, flash_attn: "
                    "disabled}` on CPU")
    serve: Literal["auto", "vllm", "llamafactory"] = Field(
        default="auto",
        description="how a checkpoint is served; `auto`: vLLM where it is installed and a GPU is present, else "
                    "`llamafactory-cli api`")
    max_new_tokens: int = Field(default=1024, ge=1, le=1_000_000,
                                description="tokens per reply of the served checkpoint")
    max_steps: int = Field(default=40, ge=1, le=200, description="agent replies per evaluated task")
    train_timeout_s: float = Field(
        default=24 * 3600, gt=0, le=30 * 24 * 3600,
        description="seconds one round's `llamafactory-cli train` may take; at most a month: a round, not a project")
    serve_timeout_s: float = Field(
        default=900, gt=0, le=24 * 3600, description="seconds until the served checkpoint answers `/v1/models`")


MAX_PRIOR_WRITES = 6  # the top of the num_write bucket 5+ (agents/plans.BUCKET_RANGE)


class GeneratorPrior(Section):
    """What the embedded generator does for properties the space does not select (agents/plans.DefaultPrior).

    ``suppress``: property -> {bucket: keep probability in [0, 1]}: while the space does not select the
    property, a plan in that bucket is kept only with that probability (one draw per blueprint; a refused one is
    planned again outside the bucket), so the bucket keeps that share of its natural count. A planted gap of
    `evosyn bench discovery`; the default suppresses nothing. Names are checked against the domain's generator
    before any work.
    """

    suppress: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="property -> {bucket: keep probability in [0, 1]}: a planted gap (see above)")
    writes: dict[int, float] | None = Field(
        default=None,
        description=f"the write count of a fulfilment while the space does not select `num_write`: count "
                    f"(0-{MAX_PRIOR_WRITES}) -> weight (unset: the generator's default, agents/plans.DefaultPrior, "
                    f"mostly single writes); `evosyn bench discovery --writes even`")

    @field_validator("suppress", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: Any) -> Any:
        """YAML 1.1 reads the buckets yes / no as booleans: read them back as the bucket names."""
        if isinstance(value, dict):
            return {k: {({True: "yes", False: "no"}[b] if isinstance(b, bool) else b): p for b, p in v.items()}
                    if isinstance(v, dict) else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _probabilities(self) -> "GeneratorPrior":
        for key, buckets in self.suppress.items():
            for value, keep in buckets.items():
                if not 0.0 <= keep <= 1.0:
                    raise ValueError(f"prior.suppress.{key}.{value}: a keep probability in [0, 1], got {keep}")
        if self.writes is not None:
            bad = [f"{n}: {w}" for n, w in self.writes.items() if not 0 <= n <= MAX_PRIOR_WRITES or w < 0]
            if bad or not any(w > 0 for w in self.writes.values()):
                raise ValueError(f"prior.writes: write counts 0-{MAX_PRIOR_WRITES} with weights >= 0, at least one "
                                 f"above 0 (got {', '.join(bad) or 'no positive weight'})")
        return self

    def is_default(self) -> bool:
        return not self.suppress and self.writes is None


class DedupConfig(Section):
    """The dedup stage after verify (tasks/dedup.py): near copies among the run's verified tasks, of the domain's
    official tasks and of its fixed test sets. It always flags (the ``dedup`` table); ``drop`` also leaves
    flagged tasks out of training."""

    drop: bool = Field(
        default=False,
        description="train without the flagged tasks (their diagnostic examples stay in the diagnostic set)")
    threshold: float = Field(default=0.8, gt=0.0, le=1.0,
                             description="the MinHash Jaccard similarity of two instructions' word shingles at "
                                         "which they are near copies")
    num_perm: int = Field(default=128, ge=16, le=1024, description="MinHash permutations")
    shingle: int = Field(default=3, ge=1, le=10, description="words per shingle")

    def is_default(self) -> bool:
        return self == DedupConfig()


class HookConfig(Section):
    """How a served learner is trained between rounds by the user's own stack (``served.train: hook``): a command,
    or a Prefect deployment (as ``train_deployment`` runs SFT on the ``gpu`` pool). It receives the round's export
    folder (ShareGPT and OpenAI-messages SFT data, and the verified tasks as rl-jsonl) and returns the model the
    next round evaluates."""

    command: str | None = Field(
        default=None,
        description="a shell command, run with the export folder as its last argument and `EVOSYN_EXPORT_DIR`, "
                    "`EVOSYN_RUN_ID`, `EVOSYN_ROUND`, `EVOSYN_MODEL` (the model just evaluated) in its environment; "
                    "the last non-empty line it prints is the next model's name (`model` or `base_url model`)")
    deployment: str | None = Field(
        default=None,
        description="`flow/deployment` run with parameters `export_dir`, `run_id`, `round`, `model`; its return "
                    "value is the next model (`model` or `base_url model`)")
    timeout_s: float = Field(default=86_400.0, gt=0, le=7 * 86_400,
                             description="seconds the hook may take; at most a week")

    @model_validator(mode="after")
    def _one_way(self) -> "HookConfig":
        if bool(self.command) == bool(self.deployment):
            raise ValueError("name exactly one of command or deployment")
        return self


class ServedLearnerConfig(RoleConfig):
    """The user's own model as the learner (``learner: served``): an OpenAI-compatible chat endpoint with tool
    calling, named like an LLM role, evaluated each round with the same episode loop, embedded user and verifier
    as every learner."""

    backend: Literal["embedded", "llm"] = Field(default="llm", description="always `llm`: a served model")
    provider: Literal["openai", "anthropic", "openai_compatible"] | None = Field(
        default="openai_compatible", description="`openai_compatible` (vLLM, SGLang, llama.cpp) or `openai`")
    max_steps: int | None = Field(default=40, ge=1, le=200, description="agent replies per evaluated task")
    train: Literal["none", "hook"] = Field(
        default="none",
        description="between rounds: `none` (the same model every round: find its gaps, synthesize targeted "
                    "data, export) or `hook` (your trainer, `hook`, returns the next model)")
    hook: HookConfig | None = Field(default=None, description="the trainer `train: hook` calls after each round")
    trials: int = Field(
        default=0, ge=0, le=64,
        description="pass@k per task: each round's verified tasks are each evaluated this many times, at "
                    "`trials_temperature`, and their pass rates stored (task set `trials`; `evosyn export "
                    "--pass-rate LO,HI` keeps a window); 0: off")
    trials_temperature: float = Field(default=1.0, ge=0.0, le=2.0,
                                      description="the sampling temperature of those trials")

    @model_validator(mode="after")
    def _served(self) -> "ServedLearnerConfig":
        if not self.model:
            raise ValueError("model: name the served model (the `model` field of its chat requests)")
        if self.provider == "anthropic":
            raise ValueError("provider: a served learner speaks the OpenAI chat API (openai_compatible or openai)")
        if self.provider == "openai_compatible" and not self.base_url:
            raise ValueError("base_url: name the served endpoint, e.g. http://127.0.0.1:8000/v1 (or provider: openai)")
        if self.train == "hook" and self.hook is None:
            raise ValueError("hook: `train: hook` needs a hook (command or deployment)")
        if self.train != "hook" and self.hook is not None:
            raise ValueError("hook: only with train: hook")
        return self
