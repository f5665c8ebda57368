"""The user's own model as the learner (``learner: served``): evaluated each round, trained between rounds by the
user's stack or not at all.

Each round evaluates the served model with the episode loop, embedded user and verifier every learner gets
(``loop.evaluate``: the diagnostic set and both fixed test sets; ``loop.reflect``: the probe set), so the Reflector
and Designer read its evaluations as they read the embedded learner's. Its replies are cached in the store's LLM
cache (a resumed round re-sends no call it made) and its calls are rows of ``llm_calls`` (the evaluation's chunk,
with tokens and cost). Which model a round evaluated is in every evaluation's ``model_version`` and in the round's
``served-<round>.json`` under the store's ``models/``: the configured one in round 1; with ``train: hook``, the one
the hook returned after the round before.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import prefect

from evosyn.agents.learners.llamafactory import TrainingError
from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent
from evosyn.agents.llm.calllog import write_calls
from evosyn.config import ServedLearnerConfig
from evosyn.storage import atomic
from evosyn.storage.records import Message
from evosyn.tasks.context import Ctx
from evosyn.tasks.engine import STAGE_TASK

log = logging.getLogger("evosyn.served")


class HookFailed(TrainingError):
    """The training hook failed or returned no model: one line naming the hook and what it said (a training
    failure: the run fails with that line, and a ``--resume`` calls the hook again)."""


@dataclass(frozen=True)
class ServedModel:
    """The model a round evaluates: its endpoint (empty: the provider's own) and name, and ``generation``: 0 for
    the configured model, r for the one the hook returned after round r. A trainer that reloads new weights under
    the same name makes a new generation: its replies are cached apart, never answered from the old model's."""

    base_url: str
    model: str
    generation: int = 0

    @property
    def fingerprint(self) -> str:
        """``served-<model>-<hash of endpoint, model and generation>``: what ``model_version`` names."""
        salt = f"\n{self.generation}" if self.generation else ""  # the configured model: its hash as it was
        digest = hashlib.sha256(f"{self.base_url}\n{self.model}{salt}".encode()).hexdigest()[:12]
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in self.model)[:40]
        return f"served-{safe}-{digest}"


def models_dir(ctx: Ctx) -> Path:
    return ctx.store.root / "models" / ctx.run_id


def model_of_round(ctx: Ctx, cfg: ServedLearnerConfig) -> ServedModel:
    """The model round ``ctx.round`` evaluates: what the hook returned after the round before, else the config's."""
    if cfg.train == "hook" and ctx.round > 1:
        path = models_dir(ctx) / f"served-next-{ctx.round - 1}.json"
        if not path.is_file():
            raise HookFailed(f"served.hook: round {ctx.round - 1} of run {ctx.run_id} recorded no next model "
                             f"({path} is missing); rerun the run with --resume")
        found = json.loads(path.read_text())
        return ServedModel(found["base_url"], found["model"], ctx.round - 1)
    return ServedModel(cfg.base_url or "", str(cfg.model))


class ServedLearner:
    """The served model as a task agent, its calls cached and kept for ``llm_calls``."""

    name = "served"

    def __init__(self, ctx: Ctx, cfg: ServedLearnerConfig, served: ServedModel, temperature: float | None = None,
                 seed: int | None = None):
        from evosyn.agents.llm.factory import role_price

        self.served, self.fingerprint, self.n_trajectories = served, served.fingerprint, 0
        self.max_steps = cfg.max_steps or 40
        cache = ctx.store.root / "llm_cache" / (f"served-generation-{served.generation}" if served.generation else "")
        self.agent = OpenAICompatibleAgent(
            served.base_url or None, served.model, cfg.api_key_env,
            temperature=cfg.temperature if temperature is None else temperature, seed=seed,
            max_tokens=cfg.max_tokens or 1024, timeout=cfg.timeout_s, tool_calls=cfg.tool_calls,
            cache_dir=cache, max_concurrency=cfg.max_concurrency, rpm=cfg.rpm,
            price=role_price(cfg.model_copy(update={"model": served.model})), keep_calls=True,
            provider=cfg.provider or "openai_compatible")
        self.agent.client.run_id, self.agent.client.round = ctx.run_id, ctx.round

    def reset(self, tools: list[dict], policy: str) -> None:
        self.agent.reset(tools, policy)

    def act(self, messages: list[Message]) -> Message:
        from evosyn.agents.learners.harness import AgentFailed
        from evosyn.agents.llm.client import LLMRequestError
        from evosyn.agents.llm.types import LLMOutputError, LLMUnavailable
        from evosyn.agents.roles import StageUnavailable

        try:
            return self.agent.act(messages)
        except (LLMRequestError, LLMOutputError) as exc:  # this conversation only (its call is a row)
            raise AgentFailed(str(exc)) from None
        except LLMUnavailable as exc:  # the endpoint cannot be reached: the run fails with one line
            raise StageUnavailable("served learner", self.agent.client.endpoint, str(exc)) from None

    def flush(self, store, chunk: str) -> None:
        """The calls made since the last flush go to ``llm_calls`` (chunk ``chunk``), before the stage's marker."""
        write_calls(store, self.agent.client.log.take(), chunk, role="learner")

    def close(self) -> None:
        self.agent.close()


def record_model(ctx: Ctx, served: ServedModel) -> None:
    atomic.write_json(models_dir(ctx) / f"served-{ctx.round}.json",
                      {"base_url": served.base_url, "model": served.model, "fingerprint": served.fingerprint})


def serve(ctx: Ctx, cfg: ServedLearnerConfig) -> ServedLearner:
    served = model_of_round(ctx, cfg)
    record_model(ctx, served)
    return ServedLearner(ctx, cfg, served)


def _next_model(text: str, current: ServedModel, round: int) -> ServedModel:
    """``model`` or ``base_url model``: the hook's answer after round ``round`` (its generation)."""
    from evosyn.config import RoleConfig

    parts = text.split()
    if len(parts) == 1:
        return ServedModel(current.base_url, parts[0], round)
    if len(parts) == 2:
        from pydantic import ValidationError

        try:  # the config's own check of a URL: http(s), a host, no credentials in it (the URL is not echoed)
            RoleConfig(base_url=parts[0])
        except ValidationError as exc:
            raise HookFailed(f"served.hook returned a base_url that {exc.errors()[0]['msg'].split(', ', 1)[-1]}"
                             ) from None
        return ServedModel(parts[0], parts[1], round)
    raise HookFailed(f"served.hook returned {text[:200]!r}: answer `model` or `base_url model`")


def export_round(ctx: Ctx) -> Path:
    """The round's export for the hook: SFT data (ShareGPT, OpenAI messages) of rounds <= this one and the verified
    tasks as rl-jsonl, under the store's ``exports/<run>/round-<r>``."""
    from evosyn.agents.learners.exports import write_openai
    from evosyn.agents.learners.llamafactory import write_dataset
    from evosyn.tasks.datasets import system_prompt
    from evosyn.tasks.exports.hf import select_examples
    from evosyn.tasks.exports.rl import rl_rows, write_rl_jsonl

    out = ctx.store.root / "exports" / ctx.run_id / f"round-{ctx.round}"
    chosen = select_examples(ctx.store, ctx.run_id, ctx.round)
    policy = system_prompt(ctx.store, ctx.run_id, ctx.env)
    write_dataset(chosen.train, out / "sharegpt", system=policy)
    write_openai(chosen.train, out / "openai", system=policy)
    (out / "rl").mkdir(parents=True, exist_ok=True)
    write_rl_jsonl(rl_rows(ctx.store, ctx.run_id, ctx.env, ctx.round).rows, out / "rl")
    return out


def run_hook(ctx: Ctx, cfg: ServedLearnerConfig, evaluated: ServedModel) -> ServedModel:
    """Call the training hook once for this round (a resumed round whose hook answered does not call it again) and
    record the model it returned for the next round."""
    path = models_dir(ctx) / f"served-next-{ctx.round}.json"
    if path.is_file():
        found = json.loads(path.read_text())
        return ServedModel(found["base_url"], found["model"], ctx.round)
    hook = cfg.hook
    assert hook is not None  # ServedLearnerConfig: train: hook has one
    folder = export_round(ctx)
    if hook.command:
        env = {**os.environ, "EVOSYN_EXPORT_DIR": str(folder), "EVOSYN_RUN_ID": ctx.run_id,
               "EVOSYN_ROUND": str(ctx.round), "EVOSYN_MODEL": evaluated.model}
        try:
            done = subprocess.run([*shlex.split(hook.command), str(folder)], capture_output=True, text=True,
                                  env=env, timeout=hook.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HookFailed(f"served.hook.command {hook.command!r}: {type(exc).__name__}: {exc}") from None
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise HookFailed(f"served.hook.command {hook.command!r} exited {done.returncode}: {last[0][:300]}")
        lines = [ln.strip() for ln in done.stdout.splitlines() if ln.strip()]
        if not lines:
            raise HookFailed(f"served.hook.command {hook.command!r} printed no model (print its name last)")
        answer = lines[-1]
    else:
        from prefect.deployments import run_deployment

        flow_run = run_deployment(hook.deployment, timeout=hook.timeout_s, poll_interval=2, parameters={
            "export_dir": str(folder), "run_id": ctx.run_id, "round": ctx.round, "model": evaluated.model})
        if flow_run.state is None or not flow_run.state.is_completed():
            state = flow_run.state.name if flow_run.state else "unknown"
            raise HookFailed(f"served.hook.deployment {hook.deployment} ended {state} (flow run {flow_run.name})")
        written = folder / "next_model.txt"  # the answer as a file: no result storage needed between processes
        try:
            answer = written.read_text().strip() if written.is_file() else str(flow_run.state.result()).strip()
        except Exception as exc:  # noqa: BLE001 - Prefect's MissingResult and the like: one line
            raise HookFailed(f"served.hook.deployment {hook.deployment}: no answer ({type(exc).__name__}); write "
                             f"the next model to EXPORT_DIR/next_model.txt or persist the flow's result") from None
        if not answer or answer == "None":
            raise HookFailed(f"served.hook.deployment {hook.deployment} returned no model")
    nxt = _next_model(answer, evaluated, ctx.round)
    atomic.write_json(path, {"base_url": nxt.base_url, "model": nxt.model, "export_dir": str(folder)})
    log.info("round %s: the hook trained %s on %s; next round evaluates %s", ctx.round, evaluated.model, folder,
             nxt.model)
    return nxt




def trials(ctx: Ctx, cfg: ServedLearnerConfig, learner: ServedLearner) -> list:
    """pass@k per task: each of the round's verified tasks (training and diagnostic) evaluated ``cfg.trials``
    times by the round's model at ``cfg.trials_temperature``, trial ``t`` with its own seed (its own cache entry);
    the evaluations (task sets ``trials-<t>``) are the pass rates ``evosyn.tasks.exports.rl.pass_rates`` reads."""
    from evosyn.tasks.datasets import cases_for
    from evosyn.tasks.exports.rl import TRIALS
    from evosyn.tasks.learn import evaluate_round

    chunk = f"eval-{TRIALS}"
    if ctx.done("evaluate", chunk):
        return [e for t in range(cfg.trials) for e in ctx.read("evaluations", f"eval-{TRIALS}-{t}")]
    kept = ctx.store.read_fields("sft_examples", ["task_id", "round"], run_id=ctx.run_id)
    cases = cases_for(ctx.store, ctx.run_id, {e["task_id"] for e in kept if e["round"] == ctx.round})
    out = []
    for t in range(cfg.trials):
        agent = ServedLearner(ctx, cfg, learner.served, temperature=cfg.trials_temperature,
                              seed=1000 * ctx.seed + t)
        agent.fingerprint = f"{learner.fingerprint}/trial{t}"
        try:
            out += evaluate_round(ctx.store, ctx.run_id, ctx.round, f"{TRIALS}-{t}", learner=agent, cases=cases,
                                  env=ctx.env, max_steps=cfg.max_steps or 40)
            agent.flush(ctx.store, chunk)
        finally:
            agent.close()
    ctx.mark("evaluate", chunk)
    return out


# --- the served learner's Prefect tasks (flows/round.py uses them when the run's learner is served)

@prefect.task(name="serve", **STAGE_TASK)
def serve_task(ctx: Ctx, cfg: ServedLearnerConfig) -> ServedLearner:
    return serve(ctx, cfg)


@prefect.task(name="trials", **STAGE_TASK)
def trials_task(ctx: Ctx, cfg: ServedLearnerConfig, learner: ServedLearner) -> list:
    return trials(ctx, cfg, learner)


@prefect.task(name="train", **STAGE_TASK)
def hook_task(ctx: Ctx, cfg: ServedLearnerConfig, evaluated: ServedModel) -> ServedModel:
    return run_hook(ctx, cfg, evaluated)
