"""The SFT flow (`sft-train`): train the round's task agent on every verified example of rounds <= r.

Deployed to the `gpu` work pool (deployments/prefect.yaml). A round calls it
through `run_deployment` when its config names a ``train_deployment`` and
otherwise trains in-process; either way the trained learner lands at the same
place in the store, so the worker that runs this flow must see the same store
root (a shared volume or object storage).
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow, task

from storage.store import Store
from pipeline import loop
from pipeline.learn import run_domain
from pipeline.stages import Ctx


@task(name="export-sft")
def export_task(store: Store, run_id: str, round: int, model: str):
    from agents.learners.llamafactory import sft_config, write_config, write_dataset
    from pipeline.datasets import examples_upto

    base = store.root / "sft" / run_id / f"round={round}"
    n = write_dataset(examples_upto(store, run_id, round, "train"), base / "data")
    if n == 0:
        raise ValueError(f"run {run_id} round {round}: no training examples in {store.root}")
    return write_config(sft_config(model, base / "data", base / "checkpoint"), base / "sft.yaml")


@task(name="llamafactory-train")
def llamafactory_task(config_path: Path) -> Path:
    from agents.learners.llamafactory import find_cli, run_training

    run_training(config_path, find_cli())
    return config_path.parent / "checkpoint"


@task(name="train")
def embedded_task(ctx: Ctx):
    from pipeline.learn import model_path

    loop.train(ctx)
    return model_path(ctx.store, ctx.run_id, ctx.round)


@flow(name="sft-train")
def sft_train(root: str, run_id: str, round: int, seed: int = 0, domain: str | None = None,
              learner: Literal["embedded", "llamafactory"] = "embedded", model: str = "Qwen/Qwen3-8B") -> str:
    """Returns the path of the trained model (embedded artifact or LLaMA-Factory checkpoint)."""
    store = Store(root)
    if learner == "embedded":
        return str(embedded_task(Ctx(store, run_id, round, seed, run_domain(store, run_id, domain))))
    return str(llamafactory_task(export_task(store, run_id, round, model)))


def train_via_deployment(ctx: Ctx, deployment: str, timeout: float | None = None):
    """Run `sft-train` on its work pool, wait for it, and load the learner it saved in the store."""
    from prefect.deployments import run_deployment

    from pipeline.learn import load_round

    flow_run = run_deployment(deployment, timeout=timeout, poll_interval=2, parameters={
        "root": str(ctx.store.root.resolve()), "run_id": ctx.run_id, "round": ctx.round, "seed": ctx.seed,
        "domain": ctx.domain, "learner": "embedded"})
    if flow_run.state is None or not flow_run.state.is_completed():
        state = flow_run.state.name if flow_run.state else "unknown"
        raise RuntimeError(f"training deployment {deployment} ended {state} (flow run {flow_run.name})")
    return load_round(ctx.store, ctx.run_id, ctx.round)


if __name__ == "__main__":
    import sys

    print(sft_train(sys.argv[1], sys.argv[2], int(sys.argv[3])))
