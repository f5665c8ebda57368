"""A run's configuration: the top level of a run config file, with the sections it nests."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from evosyn.config.base import Section
from evosyn.config.roles import ROLES, RoleConfig
from evosyn.config.sections import (DedupConfig, GeneratorPrior, LlamaFactoryConfig, OfficialEvalConfig,
                                    ServedLearnerConfig, StoreConfig)
from evosyn.storage.records import Arm

# how a run executes, not what it computes: left out of its stored config and its id (flows/run_id.py)
EXECUTION_FIELDS = ("task_runner", "dask_address")


# the largest seed: numpy's and scikit-learn's random_state take 0 to 2**32 - 1
SEED_MAX = 2**32 - 1

# the default probe set's largest size: a fixed test set's (test_size), a rate measured within about +-0.05
PROBE_SIZE = 300


def default_probe_size(budget: int, learner: str = "embedded") -> int:
    """The probe set of a run that names none: as large as its round, at most ``PROBE_SIZE``, where the learner
    can be probed (the embedded one, a served one); none for a LLaMA-Factory checkpoint (served only while it is
    evaluated)."""
    return min(budget, PROBE_SIZE) if learner in ("embedded", "served") else 0


class RunConfig(Section):
    """One closed-loop run. The upper bounds have their reasons: the paper's loops run a handful of rounds, and a
    typo (an extra digit or three) is refused at config time instead of running for days."""

    domain: str = Field(
        default="", pattern=r"^[A-Za-z0-9_]*$",
        description="a domain pack's name; empty: the default pack. The config cannot see the packs: a command "
                    "checks the name (a known domain with an environment) and fills in the default before any work")
    arm: Arm = Field(
        default="evosyn",
        description="which arm runs: `evosyn` (Reflector with learner evidence, Designer steered by feedback), "
                    "`static` (the initial space, frozen), `no_feedback` (Reflector without learner evidence, "
                    "App. B.6), `no_reflector`, `no_designer`, `single_agent` (Concepts: arms)")
    backend: Literal["embedded", "llm"] = Field(
        default="embedded",
        description="`llm`: the roles named under `roles:` run on their model; every other role stays embedded")
    rounds: int = Field(
        default=3, ge=1, le=50,
        description="closed-loop rounds (a reflecting arm may stop early, `stop_after_static_rounds`); at most 50, "
                    "ten times the handful the paper's loops run")
    budget: int = Field(
        default=200, ge=1, le=1_000_000,
        description="blueprints synthesized per round; at most a million, which is days of embedded synthesis, "
                    "and a bill with an LLM")
    seed: int = Field(
        default=0, ge=0, le=SEED_MAX,
        description="the seed of every random choice of the run (same config and seed: same rows); 0 to 2**32 - 1, "
                    "what the embedded learner's scikit-learn takes (the seeds derived from it, such as the probe "
                    "sets' 7,000,000 + 1000 x seed + round, stay within the stored int64)")
    learner: Literal["embedded", "llamafactory", "served"] = Field(
        default="embedded",
        description="`embedded`: behaviour cloning with scikit-learn, in-process; `llamafactory`: a real checkpoint "
                    "trained each round (see `llamafactory`); `served`: your model behind an OpenAI-compatible "
                    "endpoint (see `served`; guides/bring-your-model)")
    chunk_size: int = Field(
        default=50, ge=1, le=10_000,
        description="blueprints per chunk of generate / rollout / verify. A chunk is the unit of resume and of one "
                    "Prefect task: 10,000 blueprints in one would redo hours after a crash")
    test_size: int = Field(
        default=300, ge=1, le=10_000,
        description="tasks of each fixed test set (official-matched, uniform), built before round 1 (about 2.5 "
                    "blueprints a task); at most 10,000: minutes of building, and more than thirty times tau2's "
                    "largest official split")
    probe_size: int | None = Field(
        default=None, ge=0, le=10_000,
        description=f"blueprints of a balanced probe set per round (the uniform builder, in a seed namespace of the "
                    f"run's seed and round) that a Reflector with learner evidence also reads its probes on; 0: the "
                    f"diagnostic set only. Unset: the round's budget, at most {PROBE_SIZE}, with the embedded "
                    f"learner; none with a served one (Concepts). Bounded as `test_size`, and built every round")
    concurrency: int = Field(
        default=2, ge=1, le=256,
        description="chunks of a stage run at once (worker threads, or Dask worker processes); at most 256: past a "
                    "few hundred threads only take turns")
    task_runner: Literal["thread", "dask"] = Field(
        default="thread",
        description="where a round's chunk tasks (generate, rollout, verify) run: `thread` (threads of the run's "
                    "process) or `dask` (prefect-dask: a LocalCluster of `concurrency` worker processes, or the "
                    "scheduler at `dask_address`). How a round fans out changes no row, so neither is in the run "
                    "id nor in the stored config")
    dask_address: str | None = Field(
        default=None, pattern=r"^[a-z]+://\S+$",
        description="the Dask scheduler to use with `task_runner: dask`, e.g. `tcp://scheduler:8786` (unset: a "
                    "LocalCluster)")
    stop_after_static_rounds: int = Field(
        default=2, ge=0, le=50,
        description="a reflecting arm stops after this many consecutive rounds without a space update (App. B.1: "
                    "2); 0 never stops early: every arm runs `rounds` rounds and `rounds x budget` blueprints "
                    "(`bench learning`). At most `rounds`, which is at most 50")
    train_deployment: str | None = Field(
        default=None, pattern=r"^[^/\s]+/[^/\s]+$",
        description="`flow/deployment` of the SFT flow (e.g. `sft-train/sft-train` on the gpu pool); unset: trains "
                    "in-process")
    official_eval: OfficialEvalConfig | None = Field(
        default=None,
        description="e.g. `{split: test, trials: 4}`: each round also scores its learner on tau2's official split "
                    "(pass^k)")
    llamafactory: LlamaFactoryConfig = Field(default_factory=LlamaFactoryConfig,
                                             description="the learner's training and serving, read with "
                                                         "`learner: llamafactory`")
    served: ServedLearnerConfig | None = Field(
        default=None, description="the served learner's endpoint and how it is trained between rounds, read with "
                                  "`learner: served`")
    prior: GeneratorPrior = Field(default_factory=GeneratorPrior,
                                  description="the embedded generator's default prior")
    initial_factors: list[str] = Field(
        default_factory=list,
        description="controllable properties of the domain's generator added to the initial space (v1) as "
                    "standard factors, e.g. `[num_write, num_read]`: `evosyn bench discovery --space paper` plants "
                    "gaps beyond them; empty: the pack's space")
    env_data: dict[str, str] = Field(
        default_factory=dict,
        description="domain -> the folder its environment reads its data from instead of its default, e.g. "
                    "`{car_bench: /data/car-bench-data}` (a snapshot of CAR-bench's dataset, before "
                    "`EVOSYN_CARBENCH_DATA`; CAR-bench guide). A mapping, so one sweep config serves every domain; "
                    "a pack that reads no data folder, or a folder not in its layout, is one `error:` line before "
                    "any work")
    dedup: DedupConfig = Field(default_factory=DedupConfig,
                               description="near copies flagged after verify; `drop: true` trains without them "
                                           "(guides/dedup)")
    store: StoreConfig = Field(default_factory=StoreConfig,
                               description="where the run's store is, and where MLflow logs")
    roles: dict[Literal[ROLES], RoleConfig] = Field(  # type: ignore[valid-type]
        default_factory=dict,
        description="role -> its model (LLM backends guide); a role not named here stays embedded")

    @model_validator(mode="after")
    def _address_needs_dask(self) -> "RunConfig":
        if self.dask_address and self.task_runner != "dask":
            raise ValueError("dask_address: only with task_runner: dask")
        return self

    @model_validator(mode="after")
    def _probes_need_the_embedded_learner(self) -> "RunConfig":
        if self.probe_size is None:  # the default: a probe set as large as the round, where the learner can be probed
            self.probe_size = default_probe_size(self.budget, self.learner)
        elif self.probe_size and self.learner == "llamafactory":
            raise ValueError("probe_size: not with learner: llamafactory (its checkpoint is served only while it is "
                             "evaluated; set probe_size: 0)")
        return self

    @model_validator(mode="after")
    def _served_needs_its_endpoint(self) -> "RunConfig":
        if self.learner == "served" and self.served is None:
            raise ValueError("served: `learner: served` needs the endpoint, e.g. served: {base_url: "
                             "http://127.0.0.1:8000/v1, model: my-agent}")
        if self.served is not None and self.learner != "served":
            raise ValueError("served: only with learner: served")
        if self.learner == "served" and self.train_deployment:
            raise ValueError("train_deployment: a served learner is trained by served.hook (train: hook)")
        return self

    @model_validator(mode="after")
    def _official_needs_a_learner_in_hand(self) -> "RunConfig":
        if self.official_eval is not None and self.learner == "llamafactory":
            raise ValueError("official_eval: not with learner: llamafactory (its checkpoint is served only while the "
                             "fixed sets are evaluated); score a served checkpoint with `evosyn evaluate --official "
                             "--agent openai_compatible:MODEL --agent-base-url URL`")
        return self

    def stored_json(self) -> str:
        """The config as a run's row stores it: how a round fans out is left out, and so are a default ``dedup``
        section and an empty ``env_data``, so the rows of runs that keep the defaults are the ones they were before
        those fields existed."""
        exclude = set(EXECUTION_FIELDS) | ({"dedup"} if self.dedup.is_default() else set())
        if not self.env_data:  # every environment's own data: rows stay as they were before the key existed
            exclude.add("env_data")
        if self.served is None:  # likewise a run without a served learner
            exclude.add("served")
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
