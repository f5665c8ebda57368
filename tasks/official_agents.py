"""Who takes part in an official-split evaluation (the task agent, the user simulator) and where it is logged.

Agent specs: ``embedded`` (a run's trained learner of one round, as `evosyn evaluate`
loads it) or ``openai_compatible:<model>`` (any OpenAI-compatible endpoint, e.g. a
served checkpoint; its URL and the variable holding its key are given beside it).
User specs: ``embedded`` (the scripted user) or ``<provider>:<model>`` with provider
``openai``, ``anthropic`` or ``openai_compatible`` (an LLM through our client).
Every bad spec is one ``OfficialError`` line, raised before any work.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import prefect

from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.tasks import timing
from evosyn.tasks.engine import STAGE_TASK, emitter
from evosyn.tasks.official import OfficialResult, UserSim, chunk_name, evaluate_official, result_of
from evosyn.tasks.progress import Emit
from evosyn.tasks.stages import Ctx
from evosyn.config import ConfigError, OfficialEvalConfig, RoleConfig
from evosyn.storage.store import Store

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

AGENT_KINDS = ("embedded", "openai_compatible")
USER_PROVIDERS = ("openai", "anthropic", "openai_compatible")


class OfficialError(ConfigError):
    """A one-line input error of an official evaluation (the option and the fix)."""


@dataclass(frozen=True)
class AgentSpec:
    kind: str  # embedded | openai_compatible
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def label(self) -> str:
        return self.kind if self.kind == "embedded" else f"{self.kind}:{self.model}@{self.base_url}"


def parse_agent(spec: str, base_url: str | None = None, api_key_env: str | None = None,
                option: str = "--agent") -> AgentSpec:
    kind, _, model = (spec or "").partition(":")
    if kind not in AGENT_KINDS:
        raise OfficialError(f"{option} {spec!r}: unknown agent (use embedded, or openai_compatible:<model> "
                            "with --agent-base-url)")
    if kind == "embedded":
        if model:
            raise OfficialError(f"{option} {spec!r}: the embedded agent takes no model (it is the learner of "
                                "--run/--round)")
        return AgentSpec("embedded")
    if not model:
        raise OfficialError(f"{option} {spec!r}: name the served model, e.g. openai_compatible:Qwen/Qwen3-8B")
    if not base_url:
        raise OfficialError(f"{option} {spec}: --agent-base-url is missing (the server's URL, e.g. "
                            "http://127.0.0.1:8000/v1)")
    try:
        RoleConfig(base_url=base_url)
    except Exception:
        raise OfficialError("--agent-base-url: must be an http(s) URL with a host and no credentials, e.g. "
                            "http://127.0.0.1:8000/v1") from None
    if api_key_env and not os.environ.get(api_key_env):
        raise OfficialError(f"--agent-key-env: environment variable {api_key_env} is not set (export it or "
                            "put it in .env)")
    return AgentSpec(kind, model, base_url, api_key_env)


def parse_user(spec: str, base_url: str | None = None, api_key_env: str | None = None,
               option: str = "--user") -> RoleConfig | None:
    """None for the scripted user; else the LLM user's role config, checked (provider, model, price, key)."""
    if spec == "embedded":
        return None
    provider, _, model = (spec or "").partition(":")
    if provider not in USER_PROVIDERS or not model:
        raise OfficialError(f"{option} {spec!r}: unknown user (use embedded, or <provider>:<model> with provider "
                            f"{', '.join(USER_PROVIDERS)}, e.g. openai:gpt-4o)")
    try:
        rc = RoleConfig(backend="llm", provider=provider, model=model, base_url=base_url, api_key_env=api_key_env)
    except Exception:
        raise OfficialError("--user-base-url: must be an http(s) URL with a host and no credentials, e.g. "
                            "http://127.0.0.1:8000/v1") from None
    check_user(rc, "--user")
    return rc


_USER_OPTIONS = {"api_key_env": "--user-key-env", "base_url": "--user-base-url", "provider": "--user",
                 "model": "--user"}


def check_user(rc: RoleConfig, where: str) -> None:
    """``check_role_config`` naming what to fix as ``where`` does: the CLI's options (``--user``), or the config's
    fields (``official_eval.user``)."""
    from evosyn.agents.llm import check_role_config

    try:
        check_role_config("user", rc)
    except ConfigError as exc:
        text = str(exc)
        for field, option in _USER_OPTIONS.items():
            text = text.replace(f"roles.user.{field}", option if where.startswith("--") else f"{where}.{field}")
        raise OfficialError(text) from None


def build_agent(spec: AgentSpec, store: Store | None = None, run_id: str | None = None,
                round: int | None = None) -> tuple[Any, str]:
    """(the task agent, its model version). The embedded one is the stored learner of ``run_id`` / ``round``."""
    if spec.kind == "embedded":
        from evosyn.tasks.learn import load_round, model_version

        learner = load_round(store, run_id, round)  # FileNotFoundError: no model for that round
        return learner, model_version(learner, run_id, round)
    from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent

    return OpenAICompatibleAgent(spec.base_url, spec.model, api_key_env=spec.api_key_env), spec.label


def build_user(rc: RoleConfig | None, cache_dir) -> UserSim:
    if rc is None:
        return UserSim("embedded")
    from evosyn.agents.roles import client_for

    return UserSim(f"{rc.provider}:{rc.model}", client_for("user", rc, cache_dir).bound(), rc.max_invalid_retries)


def flush_user(user: UserSim, store: Store, result: OfficialResult) -> None:
    """The LLM user's calls go to ``llm_calls`` (the evaluation's chunk, role ``user``)."""
    if user.client is None:
        return
    from evosyn.agents.llm.calllog import write_calls

    write_calls(store, user.client.take_calls(result.run_id, result.round), f"{result.chunk}-user", "user")


def log_official(tracker, result: OfficialResult) -> str:
    """An MLflow run of its own (tagged ``evosyn.level`` = official): pass^k, rewards per task as an artifact.

    Run again (the same chunk), it logs into the same MLflow run and adds nothing it holds.
    """
    tags = {"evosyn.level": "official", "evosyn.run_id": result.run_id, "evosyn.round": str(result.round),
            "evosyn.domain": result.domain, "evosyn.task_set": result.task_set, "evosyn.chunk": result.chunk,
            "evosyn.tasks_sha256": result.task_source.tasks_sha256}
    found = tracker.client.search_runs(
        [tracker.experiment_id], max_results=1,
        filter_string=f"tags.`evosyn.level` = 'official' and tags.`evosyn.chunk` = '{result.chunk}' and "
                      f"tags.`evosyn.run_id` = '{result.run_id}' and tags.`evosyn.round` = '{result.round}'")
    mlrun = found[0].info.run_id if found else tracker.client.create_run(
        tracker.experiment_id, run_name=f"{result.run_id}/round-{result.round}/{result.task_set}", tags=tags
    ).info.run_id
    tracker.log_params(mlrun, {"domain": result.domain, "split": result.split, "trials": result.trials,
                               "model_version": result.model_version, "user": result.user,
                               "tasks": result.task_source.label})
    tracker.log_metrics(mlrun, result.metrics("official"), step=result.round)
    tracker.log_json(mlrun, f"{result.chunk}.json", result.model_dump(mode="json"), artifact_path="official")
    tracker.finish(mlrun)
    return mlrun


# ------------------------------------------------------------------ a run config's `official_eval`
def check_official_config(oc: OfficialEvalConfig, env: Domain) -> None:
    """One line for a split the domain lacks, a task folder without the domain's tasks, or an LLM user that
    cannot run; before any work."""
    from evosyn.tasks.official import official_domain

    domain = env.name
    try:
        dom = official_domain(env, oc.tasks_path)
    except (OSError, ValueError) as exc:
        raise OfficialError(f"official_eval.tasks_path: {exc}") from None
    splits = dom.splits()
    if oc.split not in splits:
        where = f"the {domain} tasks in {oc.tasks_path}" if oc.tasks_path else f"tau2's {domain} tasks"
        raise OfficialError(f"official_eval.split: {oc.split!r} is not a split of {where} "
                            f"(known: {', '.join(splits)})")
    if oc.user.backend == "llm":
        check_user(oc.user, "official_eval.user")


def round_official(ctx, agent, oc: OfficialEvalConfig, emit: Emit | None = None,
                   version: str | None = None) -> OfficialResult:
    """The round's task agent on the configured split; a finished evaluation is read back (resume: no new rows).

    ``agent``: the round's embedded learner (its version is derived), or any task agent with its ``version``
    (e.g. the round's served checkpoint).
    """
    if version is None:
        from evosyn.tasks.learn import model_version

        version = model_version(agent, ctx.run_id, ctx.round)
    from evosyn.tasks.official import official_domain

    user = build_user(oc.user if oc.user.backend == "llm" else None, ctx.store.root / "llm_cache")
    source = official_domain(ctx.env, oc.tasks_path).task_set()
    chunk = chunk_name(oc.split, version, user.label, oc.trials, oc.max_tasks, None,
                       source.tasks_sha256 if oc.tasks_path is not None else "")
    common = dict(run_id=ctx.run_id, round=ctx.round, split=oc.split, model_version=version)
    if ctx.done("evaluate", chunk):
        return result_of(ctx.read("evaluations", chunk), trials=oc.trials, user=user.label, chunk=chunk,
                         task_source=source, domain=ctx.domain, **common)
    result = evaluate_official(ctx.store, agent, user, trials=oc.trials, max_tasks=oc.max_tasks,
                               max_steps=oc.max_steps, emit=emit, tasks_path=oc.tasks_path, env=ctx.env, **common)
    flush_user(user, ctx.store, result)
    flush = getattr(agent, "flush", None)  # a learner that calls a model (learner: served): its calls' rows
    if flush is not None:
        flush(ctx.store, chunk)
    ctx.mark("evaluate", chunk)  # after its rows: a crash before it redoes the chunk, writing the same rows
    return result


# --- the Prefect task (flows/round.py runs it when the run config asks for tau2's official split)

@prefect.task(name="evaluate", task_run_name="evaluate official", **STAGE_TASK)
def official_task(ctx: Ctx, learner: EmbeddedLearner, oc: OfficialEvalConfig) -> OfficialResult:
    with timing.span("fn", "evaluate official", ctx.round):
        return round_official(ctx, learner, oc, emit=emitter())
