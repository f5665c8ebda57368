"""The SFT flow (`sft-train`): train the round's task agent on every verified example of rounds <= r.

Deployed to the `gpu` work pool (deployments/prefect.yaml). A round calls it
through `run_deployment` when its config names a ``train_deployment`` and
otherwise trains in-process; either way the trained learner (the embedded model,
or the LLaMA-Factory checkpoint and its marker) lands at the same place in the
store, so the worker that runs this flow must see the same store root (a shared
volume or object storage).
"""
from __future__ import annotations

from typing import Any, Literal

from prefect import flow, task

from evosyn.config import LlamaFactoryConfig
from evosyn.flows.compile import stored_domain
from evosyn.storage.store import Store
from evosyn.tasks import loop
from evosyn.tasks.learn import run_domain
from evosyn.tasks.stages import Ctx


@task(name="llamafactory-train")
def llamafactory_task(store: Store, run_id: str, round: int, domain: str, lf: LlamaFactoryConfig) -> str:
    """Export, then ``llamafactory-cli train`` (tasks/checkpoint.py): the checkpoint's path."""
    from evosyn.agents.learners.llamafactory import check_learner
    from evosyn.tasks.checkpoint import train_checkpoint

    check_learner(lf)  # this worker's CLI and GPU, before the export
    ckpt, _ = train_checkpoint(store, run_id, round, stored_domain(domain), lf, log=print)
    return str(ckpt.path)


@task(name="train")
def embedded_task(ctx: Ctx):
    from evosyn.tasks.learn import model_path

    loop.train(ctx)
    return model_path(ctx.store, ctx.run_id, ctx.round)


@flow(name="sft-train")
def sft_train(root: str, run_id: str, round: int, seed: int = 0, domain: str | None = None,
              learner: Literal["embedded", "llamafactory"] = "embedded", model: str = "Qwen/Qwen3-8B",
              llamafactory: dict[str, Any] | None = None) -> str:
    """Returns the path of the trained model (embedded artifact or LLaMA-Factory checkpoint).

    ``llamafactory``: the run's ``llamafactory`` config (``evosyn.config.LlamaFactoryConfig``); without it,
    the paper's recipe on ``model``."""
    store = Store(root)
    domain = run_domain(store, run_id, domain)
    if learner == "embedded":
        return str(embedded_task(Ctx(store, run_id, round, seed, stored_domain(domain))))
    lf = LlamaFactoryConfig.model_validate(llamafactory) if llamafactory else LlamaFactoryConfig(model=model)
    return llamafactory_task(store, run_id, round, domain, lf)


def train_via_deployment(ctx: Ctx, deployment: str, learner: str = "embedded",
                         lf: LlamaFactoryConfig | None = None, timeout: float | None = None):
    """Run `sft-train` on its work pool, wait for it, and load what it saved in the store (the embedded
    learner, or the checkpoint's marker); a flow run that does not complete fails the round, naming it."""
    from prefect.deployments import run_deployment

    from evosyn.agents.learners.llamafactory import TrainingError
    from evosyn.tasks.checkpoint import load_checkpoint
    from evosyn.tasks.learn import load_round

    root = ctx.store.location if ctx.store.remote else str(ctx.store.root.resolve())  # an s3:// store by its name
    params: dict[str, Any] = {"root": root, "run_id": ctx.run_id, "round": ctx.round,
                              "seed": ctx.seed, "domain": ctx.domain, "learner": learner}
    if learner == "llamafactory":
        params["llamafactory"] = (lf or LlamaFactoryConfig()).model_dump(mode="json")
    flow_run = run_deployment(deployment, timeout=timeout, poll_interval=2, parameters=params)
    if flow_run.state is None or not flow_run.state.is_completed():
        state = flow_run.state.name if flow_run.state else "unknown"
        raise TrainingError(f"training deployment {deployment} ended {state} (flow run {flow_run.name}): round "
                           f"{ctx.round} of run {ctx.run_id} has no trained {learner} learner")
    if learner == "llamafactory":
        return load_checkpoint(ctx.store, ctx.run_id, ctx.round)
    return load_round(ctx.store, ctx.run_id, ctx.round)


if __name__ == "__main__":
    import sys

    print(sft_train(sys.argv[1], sys.argv[2], int(sys.argv[3])))
