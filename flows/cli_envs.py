"""`evosyn envs …` and `evosyn verify`."""
from __future__ import annotations

import json
from collections import Counter

import click

from evosyn.flows.cli_app import PATH, UserError, main
from evosyn.flows.render import print_table


def _domain(name: str | None, option: str = "--domain"):
    from evosyn.flows.compile import compile_domain

    return compile_domain(name, option).env


@main.group()
def envs() -> None:
    """Environments (one per domain pack with an environment)."""


@envs.command("list")
def envs_list() -> None:
    """Known domains (those with an environment), and packs that failed to load, each with its error."""
    from evosyn.envs.packs import broken, known

    for name in known(with_environment=True):
        click.echo(name)
    for name, error in broken().items():  # reported, never fatal to the other domains
        click.echo(f"{name}  (failed to load: {error})")


@envs.command("check")
@click.argument("domain")
def envs_check(domain: str) -> None:
    """Check a domain pack: what is missing, what is left at a default that changes recorded facts, what the
    planner may plan that the generator cannot build, and its official tasks. Exit 1 on errors, 0 with warnings."""
    import traceback

    from evosyn.envs.packs import import_error
    from evosyn.flows.compile import pack_findings

    error = import_error(domain)
    if error is not None:  # the pack's own code failed: its author needs the traceback
        click.echo("".join(traceback.format_exception(error)).rstrip(), err=True)
        raise UserError(f"{domain}: the pack failed to load: {type(error).__name__}: {error}")
    found = pack_findings(domain)
    for f in found:
        click.echo(f"{f.level}: {f.line()}")
    errors = sum(f.level == "error" for f in found)
    click.echo(f"{domain}: errors {errors}, warnings {len(found) - errors}")
    if errors:
        raise SystemExit(1)


@envs.command("show")
@click.argument("domain")
def envs_show(domain: str) -> None:
    """Tools with their types, a policy summary and task counts."""
    dom = _domain(domain, "envs show")
    print_table(f"{domain}: tools", ["tool", "type", "requestor"],
                [[t.name, t.kind, t.requestor] for t in dom.tools()])
    summary = dom.summary()
    print_table(f"{domain}: database", ["table", "entities", "example ids"],
                [[k, v, ", ".join(summary.example_ids.get(k, []))] for k, v in summary.entity_counts.items()])
    print_table(f"{domain}: official tasks", ["split", "tasks"], [[k, v] for k, v in dom.splits().items()])
    headings = [line.strip("# ").strip() for line in dom.policy.splitlines() if line.startswith("#")]
    click.echo(f"policy: {len(dom.policy.split())} words; sections: {', '.join(headings[:20])}")


@main.command()
@click.option("--domain", required=True)
@click.option("--official", is_flag=True,
              help="Verify a trajectory built from each official task's gold actions.")
@click.option("--split", default="base", show_default=True)
@click.option("--task", "task_file", type=PATH,
              help="A task of your own: one tau2 task as JSON (the `evosyn export --format tau2` form).")
@click.option("--trajectory", "trajectory_file", type=PATH,
              help='Its conversation as JSON: {"messages": [...], "termination": "agent_stop"} (docs: Adding a '
                   "domain, Verifying your own trajectory).")
@click.option("--task-id", default=None, help="--task holds a list of tasks (an export's tasks.json): this one.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="How --task/--trajectory's verdict is printed.")
def verify(domain: str, official: bool, split: str, task_file: str | None, trajectory_file: str | None,
           task_id: str | None, fmt: str) -> None:
    """Verify the official tasks' gold actions (--official), or your own task and conversation
    (--task FILE --trajectory FILE). Exit 1 when a verification fails."""
    if (task_file is None) != (trajectory_file is None):
        raise UserError("--task and --trajectory go together: the task and the conversation to verify against it")
    if official == (task_file is not None):
        raise UserError("verify: pass --official, or --task FILE --trajectory FILE")
    if task_file is not None:
        _verify_files(domain, task_file, trajectory_file, task_id, fmt)
        return
    from evosyn.envs.gold import gold_messages
    from evosyn.envs.verify import run_checks

    dom = _domain(domain)
    try:
        tasks = dom.tasks(split)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    passed, failed, skipped = [], Counter(), []
    failures = []
    with click.progressbar(tasks, label=f"verifying {domain}/{split}", file=click.get_text_stream("stderr")) as bar:
        for task in bar:
            if not task.gold_actions:
                skipped.append((task.id, "no gold actions"))
                continue
            outcome = run_checks(dom, task, gold_messages(dom, task))
            if outcome.passed:
                passed.append(task.id)
                continue
            bad = [c for c in outcome.checks if not c.passed and not c.skipped]
            failed.update(c.name for c in bad)
            failures.append([task.id, outcome.reward, "; ".join(f"{c.name}: {c.reason}" for c in bad)[:160]])
    print_table(f"{domain} / {split}: {len(tasks)} tasks", ["result", "tasks"],
                [["passed", len(passed)], ["failed", len(failures)]]
                + [[f"  failed check: {k}", v] for k, v in sorted(failed.items())]
                + [["skipped", len(skipped)]])
    if skipped:
        print_table("skipped", ["task", "reason"], [list(s) for s in skipped])
    if failures:
        print_table("failed", ["task", "reward", "reasons"], failures)
        raise SystemExit(1)


def _read_json(path: str, option: str):
    from evosyn.storage.userfiles import ConfigError, read_text_file

    try:
        return json.loads(read_text_file(path, prefix=f"{option} {path}"))
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{option} {path}: not valid JSON ({exc})") from None


def _one_task(raw, task_file: str, task_id: str | None):
    """The task of ``--task``: the file's one task, or ``--task-id``'s entry of a list (an export's tasks.json)."""
    if not isinstance(raw, (dict, list)):
        raise UserError(f"--task {task_file}: expected a tau2 task (a JSON object) or a list of them")
    def ident(t: dict):  # tau2 names a task's id `id`, CAR-bench `task_id`
        return t.get("id", t.get("task_id"))

    if isinstance(raw, dict) and task_id in (None, ident(raw)):
        return raw
    if isinstance(raw, list):
        found = [t for t in raw if isinstance(t, dict) and (task_id is None or ident(t) == task_id)]
        if len(found) == 1:
            return found[0]
        ids = [ident(t) for t in raw if isinstance(t, dict)]
        if task_id is None:
            raise UserError(f"--task {task_file}: holds {len(ids)} tasks; pick one with --task-id "
                            f"({', '.join(map(str, ids[:5]))}{', ...' if len(ids) > 5 else ''})")
    raise UserError(f"--task {task_file}: no task {task_id!r} in it")


def _verify_files(domain: str, task_file: str, trajectory_file: str, task_id: str | None, fmt: str) -> None:
    """One task and one conversation, checked as the verifier checks a synthetic one (envs/verify.py)."""
    from pydantic import TypeAdapter, ValidationError

    from evosyn.envs.verify import run_checks
    from evosyn.storage.records import Message

    dom = _domain(domain)
    raw_task = _one_task(_read_json(task_file, "--task"), task_file, task_id)
    raw_traj = _read_json(trajectory_file, "--trajectory")
    if isinstance(raw_traj, list):
        raw_traj = {"messages": raw_traj}
    if not isinstance(raw_traj, dict) or not isinstance(raw_traj.get("messages"), list):
        raise UserError(f"--trajectory {trajectory_file}: expected {{\"messages\": [...]}} or a list of messages")
    try:
        task = dom.task_from_json(raw_task)  # the domain's own task form (tau2's for a tau2 pack)
    except ValueError as exc:
        raise UserError(f"--task {task_file}: not a {domain} task ({' '.join(str(exc).split())[:200]})") from None
    try:
        messages = TypeAdapter(list[Message]).validate_python(raw_traj["messages"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise UserError(f"--trajectory {trajectory_file}: message {where}: {first['msg']}") from None
    termination = str(raw_traj.get("termination", "agent_stop"))
    outcome = run_checks(dom, task, messages, termination=termination)
    verdict = {"domain": domain, "task_id": task.id, "passed": outcome.passed, "reward": outcome.reward,
               "checks": [c.model_dump() for c in outcome.checks], "observed": outcome.observed}
    if fmt == "json":
        click.echo(json.dumps(verdict, indent=2))
    else:
        # the benchmark's reward can be 1.0 while a strict check fails (a gold action skipped but the end
        # state right): say which of the two the verdict follows
        verdict_line = "passed every check" if outcome.passed else "failed (a check below failed)"
        print_table(f"{domain} / task {task.id}: {verdict_line}; the benchmark's own reward: "
                    f"{outcome.reward:.1f}", ["check", "result", "reason"],
                    [[c.name, "skipped" if c.skipped else "passed" if c.passed else "FAILED", c.reason[:160]]
                     for c in outcome.checks])
        click.echo("observed: " + "; ".join(f"{k}={','.join(v)}" for k, v in sorted(outcome.observed.items())))
    if not outcome.passed:
        raise SystemExit(1)
