"""`evosyn train`, `evosyn evaluate`, `evosyn export`, `evosyn bench learner`."""
from __future__ import annotations

from pathlib import Path

import click

from flows.cli_app import PATH, UserError, bench, main
from flows.inputs import store_from
from flows.render import print_table
from storage import atomic


def _slice_table(title: str, evaluations, factor: str) -> None:
    from agents.learners.harness import success_by_slice

    rows = [[v, s, n, f"{s / n:.2f}"] for v, (s, n) in success_by_slice(evaluations, factor).items()]
    print_table(title, [factor, "successes", "tasks", "success"], rows)


@main.command()
@click.option("--run", "run_id", required=True)
@click.option("--round", "round_", type=int, required=True)
@click.option("--learner", type=click.Choice(["embedded", "llamafactory"]), default="embedded", show_default=True)
@click.option("--model", default=None, help="llamafactory: base model path or name [default: the config's, "
                                             "else Qwen/Qwen3-8B].")
@click.option("--config", "config_file", type=PATH, default=None,
              help="llamafactory: a run config whose `llamafactory` section (model, recipe) is used.")
@click.pass_context
def train(ctx, run_id: str, round_: int, learner: str, model: str | None, config_file: str | None) -> None:
    """Train the task agent on all verified training examples of rounds <= R."""
    from pipeline.datasets import examples_upto
    from storage.config import ConfigError, load_config

    try:
        lf = load_config(config_file, env={}).llamafactory
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    lf = lf.model_copy(update={"model": model}) if model else lf
    # an unknown run is refused before the store is created
    store = store_from(ctx, runs=(run_id,), option="--run", any_table=True)
    examples = examples_upto(store, run_id, round_, "train")
    if not examples:
        raise UserError(f"--run {run_id} --round {round_}: no training examples in the store")
    if learner == "embedded":
        from pipeline.learn import train_round

        fitted, path, seconds = train_round(store, run_id, round_)
        click.echo(f"trained the embedded learner on {fitted.n_trajectories} trajectories in {seconds:.1f}s "
                   f"(fingerprint {fitted.fingerprint}); saved {path}")
        return
    from agents.learners.llamafactory import TrainingError, check_learner
    from pipeline.checkpoint import export_round, train_checkpoint
    from pipeline.learn import run_domain

    domain = run_domain(store, run_id)
    try:
        check_learner(lf)
        ckpt = export_round(store, run_id, round_, domain, lf)
        click.echo(f"exported {ckpt.n_trajectories} examples, dropped {sum(ckpt.dropped.values())}, held out "
                   f"{ckpt.held_out} diagnostic; config {ckpt.path.parent / 'sft.yaml'}")
        ckpt, before = train_checkpoint(store, run_id, round_, domain, lf, log=click.echo)
    except TrainingError as exc:
        raise UserError(str(exc)) from None
    click.echo(f"checkpoint {ckpt.path} ({ckpt.fingerprint}){' trained before' if before else ''}")


@main.command()
@click.option("--run", "run_id", required=True)
@click.option("--round", "round_", type=int, required=True)
@click.option("--set", "task_set", type=click.Choice(["diagnostic", "test"]), default="test", show_default=True)
@click.option("--quiet", is_flag=True, help="One plain line at the end, no live display.")
@click.pass_context
def evaluate(ctx, run_id: str, round_: int, task_set: str, quiet: bool) -> None:
    """Evaluate the round's task agent on the diagnostic or test set; rows go to `evaluations`."""
    from flows.progress import renderer
    from pipeline.learn import evaluate_round

    store = store_from(ctx, runs=(run_id,), option="--run", any_table=True)
    try:
        with renderer(quiet) as show:
            evaluations = evaluate_round(store, run_id, round_, task_set, emit=show)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    if not evaluations:
        raise UserError(f"--set {task_set}: no tasks to evaluate for run {run_id} round {round_}")
    rate = sum(e.success for e in evaluations) / len(evaluations)
    click.echo(f"{task_set}: {sum(e.success for e in evaluations)}/{len(evaluations)} succeeded ({rate:.3f})")
    for factor in ("num_write", "task_family", "expected_outcome"):
        _slice_table(f"{task_set} success by {factor}", evaluations, factor)


@main.command()
@click.option("--run", "run_id", required=True)
@click.option("--round", "round_", type=int, default=None, help="Accumulate rounds <= R (default: all).")
@click.option("--format", "fmt", type=click.Choice(["sharegpt", "openai", "tau2", "hf"]), required=True)
@click.option("--output", type=PATH, required=True, help="A folder (created if missing).")
@click.option("--push-to-hub", "hub_repo", default=None, metavar="REPO",
              help="hf: also upload the folder as Hugging Face dataset REPO (needs HF_TOKEN and network).")
@click.pass_context
def export(ctx, run_id: str, round_: int | None, fmt: str, output: str, hub_repo: str | None) -> None:
    """Export verified training data (LLaMA-Factory ShareGPT, OpenAI messages JSONL, tau2 tasks, HF dataset)."""
    from flows.inputs import check_output, writing
    from pipeline.hf_export import select_examples

    if hub_repo and fmt != "hf":
        raise UserError(f"--push-to-hub {hub_repo}: only with --format hf")
    store = store_from(ctx, create=False, runs=(run_id,), option="--run", any_table=True)
    out = check_output(output, "--output", kind="dir")
    chosen = select_examples(store, run_id, round_)
    if not chosen.train:
        raise UserError(f"--run {run_id}: no training examples to export (in {store.root})")
    with writing(out, "--output"):
        n, dropped = _export(store, run_id, chosen, fmt, out, round_)
    what = "tau2 tasks" if fmt == "tau2" else "training examples"
    why = "".join(f"; {r}: {k}" for r, k in dropped.most_common())
    click.echo(f"exported {n} {what} ({fmt}) to {out}; held out {chosen.held_out} diagnostic; "
               f"dropped {sum(dropped.values())}{why}")
    if hub_repo:
        from pipeline.hf_export import PushError, push_to_hub

        try:
            url = push_to_hub(out, hub_repo)
        except PushError as exc:
            raise UserError(f"--push-to-hub {hub_repo}: {exc} (the export is in {out})") from None
        click.echo(f"pushed to {url}")


def _export(store, run_id: str, chosen, fmt: str, out: Path, round_: int | None = None):
    """Write ``chosen.train`` as ``fmt`` under ``out``: (records written, reason -> examples left out)."""
    from collections import Counter

    from agents.learners.exports import tau2_tasks, write_openai
    from agents.learners.llamafactory import write_dataset
    from envs.packs import get_domain
    from pipeline.learn import run_domain

    out.mkdir(parents=True, exist_ok=True)
    examples, dropped = chosen.train, Counter()
    if fmt == "hf":
        from pipeline.hf_export import write_hf

        result = write_hf(store, run_id, chosen, out, round_)
        return result.rows, result.dropped
    # the system prompt of every conversation: the policy, as the served agent gets it (harness.run_episode)
    policy = get_domain(run_domain(store, run_id)).policy if fmt in ("sharegpt", "openai") else ""
    if fmt == "sharegpt":  # a conversation LLaMA-Factory cannot take is left out, with its reason
        exported = write_dataset(examples, out, system=policy)
        n, dropped = len(exported.rows), Counter({f"not a ShareGPT conversation ({r})": k
                                                  for r, k in exported.dropped.items()})
    elif fmt == "openai":
        exported = write_openai(examples, out, system=policy)
        n, dropped = len(exported.rows), Counter({f"not a chat conversation ({r})": k
                                                  for r, k in exported.dropped.items()})
    else:
        ids = {e.task_id for e in examples}
        tasks = [t for t in store.read_records("tasks", run_id=run_id) if t.task_id in ids]
        dropped["its task is not in the store"] = len(ids - {t.task_id for t in tasks})
        dropped["a second example of the same task"] = len(examples) - len(ids)
        dropped = +dropped  # no zero counts
        atomic.write_json(out / "tasks.json", tau2_tasks(sorted(tasks, key=lambda t: t.task_id)), indent=1)
        n = len(tasks)
    return n, dropped


@bench.command("learner")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--sizes", default="0,250,500,1000,2000", show_default=True)
@click.option("--test-size", type=int, default=200, show_default=True)
@click.option("--ablation-size", type=int, default=1000, show_default=True,
              help="Training-set size of the multi-write ablation (0 skips it).")
@click.option("--output", type=PATH, default=None)
@click.pass_context
def bench_learner(ctx, domain: str, sizes: str, test_size: int, ablation_size: int, output: str | None) -> None:
    """Learning curve of the embedded learner, and the multi-write ablation, on the fixed test set."""
    from benchmarks.common import write_json
    from benchmarks.learner import multi_write_ablation, run
    from flows.inputs import bench_output, check_domain, writing

    domain = check_domain(domain, generator=True)
    target = bench_output(f"learner-{domain}", output)
    store = store_from(ctx)
    result = run(store, domain, [int(s) for s in sizes.split(",")], test_size)
    buckets = ["0", "1", "2", "3-4", "5+"]
    def per(v: float | None) -> str:
        return "" if v is None else f"{v:.1f}"

    print_table(f"embedded learner on {domain}: test-set success ({result['test_tasks']} tasks)",
                ["train size", "success", *[f"nw={b}" for b in buckets], "train s", "eval s", "train CPU s",
                 "CPU ms/trained traj", "CPU ms/evaluated task"],
                [[r["size"], f"{r['success']:.3f}", *[r["by_num_write"].get(b, "") for b in buckets],
                  f"{r['train_seconds']:.1f}", f"{r['eval_seconds']:.1f}", f"{r['train_cpu_seconds']:.1f}",
                  per(r["train_cpu_ms_per_trajectory"]), per(r["eval_cpu_ms_per_task"])] for r in result["curve"]])
    big = result["largest"]
    click.echo(f"training {big['size']} trajectories: {big['train_cpu_seconds']:.1f} s CPU "
               f"({per(big['train_cpu_ms_per_trajectory'])} ms each); evaluation {per(big['eval_cpu_ms_per_task'])} "
               "ms CPU per task")
    if ablation_size:
        result.update(multi_write_ablation(store, domain, ablation_size, test_size))
        print_table(f"multi-write ablation ({ablation_size} training tasks each)",
                    ["training data", "multi-write share", "success", "success on 3+ writes",
                     *[f"nw={b}" for b in buckets]],
                    [[r["train"], f"{r['multi_write_share']:.2f}", f"{r['success']:.3f}",
                      f"{r['success_3plus_writes']:.3f} (n={r['tasks_3plus_writes']})",
                      *[r["by_num_write"].get(b, "") for b in buckets]] for r in result["ablation"]])
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'learner-{domain}', result, target)}")
