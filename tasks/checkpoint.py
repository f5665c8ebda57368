"""The ``llamafactory`` learner's half of a round: export, train, serve and evaluate a checkpoint.

Each round exports every verified training example of rounds <= r as ShareGPT
with tools and the domain policy as the system prompt (the prompt the served
agent gets in ``harness.run_episode``), writes the recipe, runs ``llamafactory-cli
train`` (here, or in the ``sft-train`` flow on the gpu pool: ``flows/train.py``),
then serves the checkpoint (``evosyn.agents.learners.serving``) and evaluates it on the
diagnostic and test sets with the harness and user simulator the embedded learner
is scored with. Its evaluations carry ``model_version`` ``<run>/r<round>/llamafactory-<hash>``:
the hash is the checkpoint's (of its training data and recipe), recorded beside it in
``evosyn_checkpoint.json``, so every row names the checkpoint that produced it.

Resume: a checkpoint whose marker matches this round's export is not trained again;
finished evaluation sets are read back (no server started when both are).
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import prefect

from evosyn.agents.learners.exports import DATASET_NAME
from evosyn.agents.learners.llamafactory import TrainingError, find_cli, recipe_of, run_training, write_config, \
    write_dataset
from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent
from evosyn.envs.base import Domain
from evosyn.storage import atomic
from evosyn.storage.atomic import read_or_none
from evosyn.config import LlamaFactoryConfig
from evosyn.storage.records import Evaluation, Message
from evosyn.storage.store import Store
from evosyn.tasks import timing
from evosyn.tasks.engine import STAGE_TASK, emitter
from evosyn.tasks.datasets import examples_upto, system_prompt
from evosyn.tasks.dedup import training_examples
from evosyn.tasks.learn import Checkpoint
from evosyn.tasks.progress import Emit
from evosyn.tasks.stages import Ctx, emit_event

MARKER = "evosyn_checkpoint.json"
_PATH_KEYS = ("model_name_or_path", "dataset_dir", "output_dir", "deepspeed")  # where, not what: not hashed


def sft_dir(store: Store, run_id: str, round: int) -> Path:
    return store.root / "sft" / run_id / f"round={round}"


def export_round(store: Store, run_id: str, round: int, env: Domain, lf: LlamaFactoryConfig) -> Checkpoint:
    """The round's dataset, ``dataset_info.json`` and ``sft.yaml``; the checkpoint they will train (not yet)."""
    base = sft_dir(store, run_id, round)
    exported = write_dataset(training_examples(store, run_id, round), base / "data",
                             system=system_prompt(store, run_id, env))
    held_out = len(examples_upto(store, run_id, round, "diagnostic"))
    if not exported.rows:
        raise TrainingError(f"run {run_id} round {round}: no training example to export ({exported.line()})")
    recipe = recipe_of(lf, base / "data", base / "checkpoint")
    write_config(recipe, base / "sft.yaml")
    what = {k: v for k, v in recipe.items() if k not in _PATH_KEYS}
    digest = hashlib.sha256((base / "data" / f"{DATASET_NAME}.json").read_bytes()
                            + json.dumps([lf.model, what], sort_keys=True, default=str).encode()).hexdigest()[:12]
    ckpt = Checkpoint(base / "checkpoint", f"llamafactory-{digest}", len(exported.rows), held_out,
                      dict(exported.dropped.most_common()))
    atomic.write_json(base / "export.json", {"line": exported.line(held_out), **_marker(ckpt)}, indent=2)
    return ckpt


def _marker(ckpt: Checkpoint) -> dict:
    return {"fingerprint": ckpt.fingerprint, "exported": ckpt.n_trajectories, "held_out": ckpt.held_out,
            "dropped": ckpt.dropped}


def trained_checkpoint(ckpt: Checkpoint) -> bool:
    marker = read_or_none(ckpt.path / MARKER, lambda p: json.loads(p.read_text()), "checkpoint marker")
    return bool(marker) and marker.get("fingerprint") == ckpt.fingerprint and (ckpt.path / "config.json").exists()


def train_checkpoint(store: Store, run_id: str, round: int, env: Domain, lf: LlamaFactoryConfig,
                     log=lambda line: None) -> tuple[Checkpoint, bool]:
    """Export and train (``llamafactory-cli train``); (checkpoint, trained before). The marker is written
    last: a checkpoint folder without it (a killed training) is trained again."""
    ckpt = export_round(store, run_id, round, env, lf)
    if trained_checkpoint(ckpt):
        return ckpt, True
    (ckpt.path / MARKER).unlink(missing_ok=True)  # an earlier round's data: this one is not trained yet
    run_training(sft_dir(store, run_id, round) / "sft.yaml", find_cli(), log=log, timeout=lf.train_timeout_s)
    atomic.write_json(ckpt.path / MARKER, _marker(ckpt), indent=2)
    return ckpt, False


def load_checkpoint(store: Store, run_id: str, round: int) -> Checkpoint:
    """The checkpoint a round trained (here or on the gpu pool), from its marker."""
    path = sft_dir(store, run_id, round) / "checkpoint"
    marker = read_or_none(path / MARKER, lambda p: json.loads(p.read_text()), "checkpoint marker")
    if not marker:
        raise TrainingError(f"no trained checkpoint for run {run_id} round {round} ({path / MARKER} is missing)")
    return Checkpoint(path, marker["fingerprint"], marker["exported"], marker["held_out"], marker["dropped"])


def trained_event(emit: Emit | None, ctx: Ctx, ckpt: Checkpoint, how: str = "", since: float | None = None) -> None:
    dropped = sum(ckpt.dropped.values())
    why = "".join(f"; {r}: {k}" for r, k in ckpt.dropped.items())
    emit_event(emit, ctx, "train", 1, 1, total=1, since=since,
               detail=f"checkpoint {ckpt.fingerprint}{how}: exported {ckpt.n_trajectories}, dropped {dropped}{why}; "
                      f"held out {ckpt.held_out} diagnostic")


def train(ctx: Ctx, lf: LlamaFactoryConfig, emit: Emit | None = None) -> Checkpoint:
    t0 = time.monotonic()
    ckpt, before = train_checkpoint(ctx.store, ctx.run_id, ctx.round, ctx.env, lf)
    trained_event(emit, ctx, ckpt, ", trained before" if before else "", t0)
    return ckpt


class ServedCheckpoint:
    """The checkpoint as a task agent: its server's replies, under the checkpoint's name (``fingerprint``)."""

    name = "llamafactory"

    def __init__(self, ckpt: Checkpoint, agent: OpenAICompatibleAgent):
        self.fingerprint, self.n_trajectories, self.agent = ckpt.fingerprint, ckpt.n_trajectories, agent

    def reset(self, tools: list[dict], policy: str) -> None:
        self.agent.reset(tools, policy)

    def act(self, messages: list[Message]) -> Message:
        return self.agent.act(messages)


def evaluate(ctx: Ctx, ckpt: Checkpoint, lf: LlamaFactoryConfig, test_size: int, emit: Emit | None = None
             ) -> tuple[list[Evaluation], list[Evaluation], list[Evaluation]]:
    """(diagnostic, test, test_uniform) evaluations of the served checkpoint; the server runs only while a set
    is missing."""
    import evosyn.tasks.loop as loop
    from evosyn.agents.learners.serving import serving

    sets = ("diagnostic", "test", "test_uniform")
    if all(ctx.done("evaluate", f"eval-{s}") for s in sets):
        diag, test, uniform = (loop.evaluate(ctx, ckpt, s, test_size, emit=emit) for s in sets)
        return diag, test, uniform
    with serving(ckpt.path, lf) as served:
        served_agent = OpenAICompatibleAgent(served.base_url, served.model, temperature=0.0,
                                             max_tokens=lf.max_new_tokens)
        agent = ServedCheckpoint(ckpt, served_agent)
        try:
            diag, test, uniform = (loop.evaluate(ctx, agent, s, test_size, emit=emit, max_steps=lf.max_steps)
                                   for s in sets)
        finally:
            served_agent.close()
    return diag, test, uniform


# --- the LLaMA-Factory learner's Prefect tasks (flows/round.py uses them when the run's learner is llamafactory)

@prefect.task(name="train", **STAGE_TASK)
def train_checkpoint_task(ctx: Ctx, lf: LlamaFactoryConfig) -> Checkpoint:
    with timing.span("fn", "train", ctx.round):
        return train(ctx, lf, emit=emitter())


@prefect.task(name="evaluate", **STAGE_TASK)
def evaluate_checkpoint_task(ctx: Ctx, ckpt: Checkpoint, lf: LlamaFactoryConfig, test_size: int
                             ) -> tuple[list[Evaluation], list[Evaluation], list[Evaluation]]:
    """The served checkpoint on the three sets: one server for them."""
    with timing.span("fn", "evaluate", ctx.round):
        return evaluate(ctx, ckpt, lf, test_size, emit=emitter())
