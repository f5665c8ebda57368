"""Run configuration: YAML -> pydantic, environment overrides, `.env` for secrets.

Secrets never live in the config itself: a role names the environment variable
that holds its API key (``api_key_env``), read only when the client is built.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evosyn.storage.records import Arm
from evosyn.storage.userfiles import ConfigError, load_dotenv_secrets, read_text_file  # noqa: F401 (their home before)

ROLES = ("designer", "planner", "generator", "teacher", "user", "repair", "reflector", "task_agent")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoleConfig(_Strict):
    backend: Literal["embedded", "llm"] = "embedded"
    provider: Literal["openai", "anthropic", "openai_compatible"] | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    # Every size has an upper bound, with its reason: a typo (an extra digit or three) is refused at config
    # time instead of running for hours or filling memory. No model writes a million-token reply;
    max_tokens: int = Field(default=4096, ge=1, le=1_000_000)
    # calls in flight per model: a batch role gathers a whole stage (1,200-1,500 blueprints a round at the
    # paper's scale) into one batch; past a few thousand open connections a laptop runs out of sockets;
    max_concurrency: int = Field(default=8, ge=1, le=4096)
    # no provider's tier announces more than a million requests or a billion tokens a minute
    rpm: int | None = Field(default=None, ge=1, le=1_000_000)
    tpm: int | None = Field(default=None, ge=1, le=1_000_000_000)
    max_invalid_retries: int = Field(default=2, ge=0, le=10)
    # transport: seconds per request, and retries of 429 / 5xx / timeouts / connection errors
    timeout_s: float = Field(default=120.0, gt=0, le=3600)  # an hour: no single reply takes longer
    max_retries: int = Field(default=6, ge=0, le=20)
    # bytes of one reply, refused while it is read (agents/llm/transport.py): 8 MiB is hundreds of times a
    # long completion; at most 1 GiB, so a typo cannot let a hostile server fill memory
    max_reply_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, le=1024 ** 3)
    # when the role's replies stay invalid (none usable in a stage, or a designer / reflector answer rejected
    # after its re-asks): "fail" stops the run with one line (a configured model is what the user pays for);
    # "fallback" goes on (the embedded designer / reflector, or the items rejected) with a warning in the
    # stage's line, the report and MLflow, and a `fallback` row in llm_calls
    on_invalid: Literal["fail", "fallback"] = "fail"
    # USD per million tokens, for a model the price table lacks (or to override it)
    input_cost_per_mtok: float | None = Field(default=None, ge=0)
    output_cost_per_mtok: float | None = Field(default=None, ge=0)
    # "prompt": tools described in the system prompt and the call read as JSON from the reply text, for
    # models whose chat template has no tool calling (agents/llm/prompt_tools.py); "native": the API's tools
    tool_calls: Literal["native", "prompt"] = "native"
    # teacher only: model calls per rollout before it ends as `max_steps` (None: the teacher's default, 40)
    max_steps: int | None = Field(default=None, ge=1, le=200)
    # how a structured role's JSON schema reaches the server, so that decoding is constrained to it
    # (agents/llm/providers.py): "response_format" (OpenAI's json_schema; llama.cpp's server turns it into a
    # grammar, vLLM into guided decoding), "structured_outputs" (vLLM >= 0.10's own field), "guided_json"
    # (vLLM before 0.12), "none" (the schema only checked on our side). Anthropic: always its forced tool.
    structured_output: Literal["response_format", "structured_outputs", "guided_json", "none"] = "response_format"
    # openai_compatible: a maxLength on every free string and a maxItems on every array of the schema sent (a free
    # value: a short scalar or list), so a grammar-constrained small model cannot fill one until max_tokens (None:
    # the role's schema as it is)
    schema_max_string: int | None = Field(default=None, ge=1)
    schema_max_items: int | None = Field(default=None, ge=1)
    # the provider's batch API (OpenAI's Batch API, Anthropic's Message Batches: half the price, replies within
    # hours) for a non-interactive role (designer, planner, generator, reflector, repair): the calls that arrive
    # within batch_window_s of each other go as one batch (set max_concurrency to the stage's size), polled
    # every batch_poll_s, then more slowly (agents/llm/batch.py)
    batch: bool = False
    batch_window_s: float = Field(default=2.0, ge=0)
    batch_poll_s: float = Field(default=30.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """An http(s) URL with a host: checked here, so a typo fails at config time, not after a round."""
        if value is None:
            return value
        try:
            parts = urlsplit(value)
            _ = parts.port  # raises on a port that is not a number (or out of range)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # an unparsable host or port
            ok = False
        if not ok:
            raise ValueError("must be an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1")
        if parts.username or parts.password:  # it would be in every error line, cache key and record
            raise ValueError("must not carry credentials (user:key@): name the key's variable in api_key_env")
        return value


class StoreConfig(_Strict):
    # a folder, or s3://bucket/prefix on object storage (docs: guides/store-on-s3); None: EVOSYN_HOME, else ./.evosyn
    root: str | None = None
    tracking_uri: str | None = None


class OfficialEvalConfig(_Strict):
    """At the end of each round, the round's learner on a split of tau2's official tasks (tasks/official.py)."""

    # a split of the domain's official tasks (train, test, base, ...): storage cannot see the domains, so
    # tasks/official_agents.py checks the name against the domain before any work (`run`, `evosyn_run`)
    split: str = Field(default="test", pattern=r"^[A-Za-z0-9_]+$")
    trials: int = Field(default=1, ge=1, le=64)  # k of pass^k
    max_tasks: int | None = Field(default=None, ge=1, le=100_000)  # the split's first N (splits hold hundreds)
    max_steps: int = Field(default=40, ge=1, le=500)
    user: RoleConfig = Field(default_factory=RoleConfig)  # embedded (scripted) unless backend: llm
    # the official tasks of this tau2 data folder (e.g. a tau2-bench v1.0.1 checkout) instead of the installed
    # package's, some of which predate v1.0's task fixes (docs: guides/official-tasks)
    tasks_path: str | None = None


class LlamaFactoryConfig(_Strict):
    """``learner: llamafactory``: what each round trains, and how its checkpoint is served for evaluation."""

    model: str = "Qwen/Qwen3-8B"  # base model: a folder (or hub name) the training machine has
    template: str = "qwen3"  # LLaMA-Factory's chat template, in training and in `llamafactory-cli api`
    deepspeed: bool = True  # ZeRO-3 (agents/learners/ds_z3_config.json), as the paper trains
    # keys of the paper's recipe to override, e.g. {max_steps: 3, bf16: false, flash_attn: disabled} on CPU
    recipe: dict[str, Any] = Field(default_factory=dict)
    # auto: vLLM where it is installed and a GPU is present, else `llamafactory-cli api`
    serve: Literal["auto", "vllm", "llamafactory"] = "auto"
    max_new_tokens: int = Field(default=1024, ge=1, le=1_000_000)  # per reply of the served checkpoint
    max_steps: int = Field(default=40, ge=1, le=200)  # agent replies per evaluated task
    train_timeout_s: float = Field(default=24 * 3600, gt=0, le=30 * 24 * 3600)  # a month: a round, not a project
    serve_timeout_s: float = Field(default=900, gt=0, le=24 * 3600)  # until the server answers /v1/models


MAX_PRIOR_WRITES = 6  # the top of the num_write bucket 5+ (agents/plans.BUCKET_RANGE)


class GeneratorPrior(_Strict):
    """What the embedded generator does for properties the space does not select (agents/plans.DefaultPrior).

    ``suppress``: property -> {bucket: keep probability in [0, 1]}: while the space does not select the
    property, a plan in that bucket is kept only with that probability (one draw per blueprint; a refused one is
    planned again outside the bucket), so the bucket keeps that share of its natural count. A planted gap of
    `evosyn bench discovery`; the default suppresses nothing. Names are checked against the domain's generator
    before any work.
    """

    suppress: dict[str, dict[str, float]] = Field(default_factory=dict)
    # the write count of a fulfilment while the space does not select num_write: count -> weight (None: the
    # generator's default, agents/plans.DefaultPrior, mostly single writes); `evosyn bench discovery --writes even`
    writes: dict[int, float] | None = None

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


class DedupConfig(_Strict):
    """The dedup stage after verify (tasks/dedup.py): near copies among the run's verified tasks, of the domain's
    official tasks and of its fixed test sets. It always flags (the ``dedup`` table); ``drop`` also leaves
    flagged tasks out of training."""

    drop: bool = False  # train without the flagged tasks (their diagnostic examples stay in the diagnostic set)
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)  # MinHash Jaccard of the instructions' word shingles
    num_perm: int = Field(default=128, ge=16, le=1024)  # MinHash permutations
    shingle: int = Field(default=3, ge=1, le=10)  # words per shingle

    def is_default(self) -> bool:
        return self == DedupConfig()


# how a run executes, not what it computes: left out of its stored config and its id (flows/run_id.py)
EXECUTION_FIELDS = ("task_runner", "dask_address")


# the default probe set's largest size: a fixed test set's (test_size), a rate measured within about +-0.05
PROBE_SIZE = 300


def default_probe_size(budget: int, learner: str = "embedded") -> int:
    """The probe set of a run that names none: as large as its round, at most ``PROBE_SIZE``, where the learner
    can be probed (the embedded one); none for a served learner."""
    return min(budget, PROBE_SIZE) if learner == "embedded" else 0


class RunConfig(_Strict):
    # a domain pack's name; "" is the default pack. Storage cannot see the packs: flows/inputs.py
    # checks the name (a known domain with an environment) and fills the default before any work
    domain: str = Field(default="", pattern=r"^[A-Za-z0-9_]*$")
    arm: Arm = "evosyn"
    backend: Literal["embedded", "llm"] = "embedded"
    # upper bounds, with their reasons: the paper's loops run a handful of rounds (50 is ten times that); a
    # million blueprints a round is days of embedded synthesis, and a bill with an LLM
    rounds: int = Field(default=3, ge=1, le=50)
    budget: int = Field(default=200, ge=1, le=1_000_000)
    seed: int = Field(default=0, ge=0)
    learner: Literal["embedded", "llamafactory"] = "embedded"
    # a chunk is the unit of resume and of one Prefect task: 10,000 blueprints in one would redo hours after a crash
    chunk_size: int = Field(default=50, ge=1, le=10_000)
    # tasks of each fixed test set (official-matched, uniform), built before round 1 (about 2.5 blueprints a task):
    # 10,000 is minutes of building, and more than thirty times tau2's largest official split
    test_size: int = Field(default=300, ge=1, le=10_000)
    # blueprints of a balanced probe set per round (the uniform builder, in a seed namespace of the run's seed and
    # round) that a Reflector with learner evidence also reads its probes on; 0: the diagnostic set only. Unset: the
    # round's budget, at most PROBE_SIZE, with the embedded learner; none with a served one (docs/concepts.md)
    probe_size: int | None = Field(default=None, ge=0, le=10_000)  # as test_size: built every round
    concurrency: int = Field(default=2, ge=1, le=256)  # worker threads: past a few hundred they only take turns
    # where a round's chunk tasks (generate, rollout, verify) run: "thread" (threads of the run's process) or
    # "dask" (prefect-dask: a LocalCluster of `concurrency` worker processes, or the scheduler at dask_address);
    # how a round fans out changes no row, so neither is in the run id nor in the stored config
    task_runner: Literal["thread", "dask"] = "thread"
    dask_address: str | None = Field(default=None, pattern=r"^[a-z]+://\S+$")  # e.g. tcp://scheduler:8786
    # a reflecting arm stops after this many consecutive rounds without a space update (App. B.1: 2);
    # 0 never stops early: every arm runs `rounds` rounds and `rounds x budget` blueprints (`bench learning`)
    stop_after_static_rounds: int = Field(default=2, ge=0, le=50)  # at most `rounds`, which is at most 50
    # "flow/deployment" of the SFT flow (e.g. "sft-train/sft-train" on the gpu pool); None trains in-process
    train_deployment: str | None = Field(default=None, pattern=r"^[^/\s]+/[^/\s]+$")
    # e.g. {split: test, trials: 4}: each round also scores its learner on tau2's official split (pass^k)
    official_eval: OfficialEvalConfig | None = None
    llamafactory: LlamaFactoryConfig = Field(default_factory=LlamaFactoryConfig)  # read when learner: llamafactory
    prior: GeneratorPrior = Field(default_factory=GeneratorPrior)  # the embedded generator's default prior
    # controllable properties of the domain's generator added to the initial space (v1) as standard factors, e.g.
    # [num_write, num_read]: `evosyn bench discovery --space paper` plants gaps beyond them; [] the pack's space
    initial_factors: list[str] = Field(default_factory=list)
    # domain -> the folder its environment reads its data from instead of its default (CAR-bench: a snapshot of
    # its HF dataset, before EVOSYN_CARBENCH_DATA); a mapping, so one sweep config serves every domain. Storage
    # cannot see the packs: flows/run.py checks each entry (a pack that reads data, a folder in its layout)
    env_data: dict[str, str] = Field(default_factory=dict)
    # near copies flagged after verify; `drop: true` trains without them (docs/guides/dedup.md)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    roles: dict[Literal[ROLES], RoleConfig] = Field(default_factory=dict)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _address_needs_dask(self) -> "RunConfig":
        if self.dask_address and self.task_runner != "dask":
            raise ValueError("dask_address: only with task_runner: dask")
        return self

    @model_validator(mode="after")
    def _probes_need_the_embedded_learner(self) -> "RunConfig":
        if self.probe_size is None:  # the default: a probe set as large as the round, where the learner can be probed
            self.probe_size = default_probe_size(self.budget, self.learner)
        elif self.probe_size and self.learner != "embedded":
            raise ValueError("probe_size: only with learner: embedded for now (set probe_size: 0)")
        return self

    @model_validator(mode="after")
    def _official_needs_the_embedded_learner(self) -> "RunConfig":
        if self.official_eval is not None and self.learner != "embedded":
            raise ValueError("official_eval: only with learner: embedded for now; score a served checkpoint with "
                             "`evosyn evaluate --official --agent openai_compatible:MODEL --agent-base-url URL`")
        return self

    def stored_json(self) -> str:
        """The config as a run's row stores it: how a round fans out is left out, and so are a default ``dedup``
        section and an empty ``env_data``, so the rows of runs that keep the defaults are the ones they were before
        those fields existed."""
        exclude = set(EXECUTION_FIELDS) | ({"dedup"} if self.dedup.is_default() else set())
        if not self.env_data:  # every environment's own data: rows stay as they were before the key existed
            exclude.add("env_data")
        return self.model_dump_json(exclude=exclude)

    def store_location(self) -> str:
        """Where the store's tables live: a local folder, or ``s3://bucket/prefix`` (storage/objectstore.py)."""
        return self.store.root or os.environ.get("EVOSYN_HOME") or ".evosyn"

    def store_root(self) -> Path:
        """This machine's folder of the store: the store itself, or for an ``s3://`` store the local folder of
        what it does not share (the Prefect home, the default MLflow database, caches, reports)."""
        from evosyn.storage.objectstore import is_remote, local_home

        location = self.store_location()
        return local_home(location) if is_remote(location) else Path(location).expanduser()


# environment variable -> the RunConfig field it overrides (`load_config`: after the file, before the flags)
ENV_OVERRIDES = {
    "EVOSYN_DOMAIN": "domain", "EVOSYN_ARM": "arm", "EVOSYN_BACKEND": "backend",
    "EVOSYN_ROUNDS": "rounds", "EVOSYN_BUDGET": "budget", "EVOSYN_SEED": "seed",
    "EVOSYN_LEARNER": "learner",
}


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
    if err["type"] == "extra_forbidden":
        return f"field '{loc}': unknown field (remove it or check its spelling)"
    if err["loc"] and err["loc"][-1] == "base_url":  # it may hold credentials: never echoed
        return f"field '{loc}': {err['msg']}"
    return f"field '{loc}': {err['msg']} (got {err.get('input')!r})"


def validate_config(data: Any, source: str = "config") -> RunConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {source}: the top level must be a mapping of fields, "
                          f"got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid {source}: " + "; ".join(_describe(e) for e in exc.errors())) from None


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    import yaml  # here: every command loads this module at start-up, few read a YAML file

    p = Path(path)
    text = read_text_file(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid config {p}: YAML syntax error{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"invalid config {p}: nested too deeply to parse (flatten it)") from None
    return data if data is not None else {}


def load_config(path: str | os.PathLike[str] | None = None, overrides: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> RunConfig:
    """File, then ``EVOSYN_*`` environment variables, then explicit overrides (CLI flags)."""
    env = os.environ if env is None else env
    data = read_config_file(path) if path is not None else {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {path}: the top level must be a mapping of fields")
    for var, field in ENV_OVERRIDES.items():
        if env.get(var):
            data[field] = env[var]
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    return validate_config(data, source=f"config {path}" if path else "config")
