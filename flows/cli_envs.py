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
    planner may plan that the generator cannot build, and its official tasks; then run its code once (every tool,
    a few official and generated tasks' gold actions with the policy), each fault one line naming its file and
    line. Exit 1 on errors, 0 with warnings."""
    from evosyn.envs.pack_errors import traceback_text
    from evosyn.envs.packs import broken, import_error
    from evosyn.flows.cli_app import debugging
    from evosyn.flows.compile import pack_findings

    error = import_error(domain)
    if error is not None:  # the pack's own code failed: its file and line, the traceback with --debug
        if debugging():
            click.echo(traceback_text(error), err=True)
        raise UserError(f"{domain}: the pack failed to load: {broken()[domain]}")
    found = pack_findings(domain)
    if not any(f.level == "error" for f in found):  # loads and is complete: run its code once (agents/pack_trial)
        from evosyn.agents.pack_trial import trial

        found = found + trial(_domain(domain, "envs check"))
        found.sort(key=lambda f: f.level != "error")
    for f in found:
        click.echo(f"{f.level}: {f.line()}")
    errors = sum(f.level == "error" for f in found)
    if not errors and (env := _domain(domain, "envs check")).pack.has_generator:  # how many distinct tasks it builds
        from evosyn.agents.capacity import capacity

        click.echo(capacity(env).line())
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


def _pack_faults(command):
    """A tool of the pack that raises while a command replays it: one line naming the tool, file and line."""
    import functools

    @functools.wraps(command)
    def wrapped(*args, **kwargs):
        from evosyn.envs.pack_errors import ToolFault

        try:
            return command(*args, **kwargs)
        except ToolFault as exc:
            raise UserError(f"--domain {kwargs.get('domain')}: {exc}") from None
    return wrapped


@main.command()
@click.option("--domain", required=True)
@click.option("--official", is_flag=True,
              help="Verify a trajectory built from each official task's gold actions.")
@click.option("--split", default=None,
              help="--official: the split whose gold actions are verified (default: the domain's own, e.g. tau2's "
                   "base, every task; CAR-bench's test).")
@click.option("--task", "task_file", type=PATH,
              help="A task of your own: one tau2 task as JSON (the `evosyn export --format tau2` form).")
@click.option("--trajectory", "trajectory_file", type=PATH,
              help='Its conversation as JSON: {"messages": [...], "termination": "agent_stop"} (docs: Adding a '
                   "domain, Verifying your own trajectory).")
@click.option("--task-id", default=None, help="--task holds a list of tasks (an export's tasks.json): this one.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="How --task/--trajectory's verdict is printed.")
@click.option("--fill-observations", "fill", is_flag=True,
              help="With --task/--trajectory: fill every tool message of the conversation with what the tool returns "
                   "on replay (a tool output must match it byte for byte) and print the filled conversation as JSON; "
                   "with --output, write it there and verify it.")
@click.option("--output", type=PATH, default=None, help="--fill-observations: the file the filled conversation goes to.")
@_pack_faults
def verify(domain: str, official: bool, split: str | None, task_file: str | None, trajectory_file: str | None,
           task_id: str | None, fmt: str, fill: bool, output: str | None) -> None:
    """Verify the official tasks' gold actions (--official), or your own task and conversation
    (--task FILE --trajectory FILE). Exit 1 when a verification fails."""
    if (task_file is None) != (trajectory_file is None):
        raise UserError("--task and --trajectory go together: the task and the conversation to verify against it")
    if official == (task_file is not None):
        raise UserError("verify: pass --official, or --task FILE --trajectory FILE")
    if output is not None and not fill:
        raise UserError(f"--output {output}: goes with --fill-observations (the file the filled conversation goes to)")
    if fill and task_file is None:
        raise UserError("--fill-observations: goes with --task FILE --trajectory FILE (the conversation to fill)")
    if task_file is not None:
        _verify_files(domain, task_file, trajectory_file, task_id, fmt, fill, output)
        return
    from evosyn.envs.gold import gold_messages
    from evosyn.envs.verify import run_checks

    dom = _domain(domain)
    if not dom.tasks(None):  # a domain of one's own: a table of zeros would read as a pass
        raise UserError(f"{dom.name} has no official tasks (its environment's tasks() lists none); verify your own "
                        "with --task FILE --trajectory FILE")
    split = split or dom.default_split
    try:
        tasks = dom.tasks(split)
    except KeyError:
        raise UserError(f"--split {split}: not a split of {dom.name}'s official tasks (known: "
                        f"{', '.join(dom.splits()) or 'none'})") from None
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
            reasons = "; ".join(f"{c.name}: {c.reason}" for c in bad)  # whole: the table wraps it
            failures.append([task.id, outcome.reward, reasons] if dom.benchmark else [task.id, reasons])
    print_table(f"{domain} / {split}: {len(tasks)} tasks", ["result", "tasks"],
                [["passed", len(passed)], ["failed", len(failures)]]
                + [[f"  failed check: {k}", v] for k, v in sorted(failed.items())]
                + [["skipped", len(skipped)]])
    if skipped:
        print_table("skipped", ["task", "reason"], [list(s) for s in skipped])
    if failures:
        print_table("failed", ["task", f"{dom.benchmark}'s reward", "reasons"] if dom.benchmark
                    else ["task", "reasons"], failures)
        raise SystemExit(1)


def _read_json(path: str, option: str):
    """A user's JSON file, or one line: too large (refused before reading), too deep, a huge integer, ...
    (storage/userfiles.py)."""
    from evosyn.storage.userfiles import ConfigError, read_json_file

    try:
        return read_json_file(path, prefix=f"{option} {path}")
    except ConfigError as exc:
        raise UserError(str(exc)) from None


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


def _verify_files(domain: str, task_file: str, trajectory_file: str, task_id: str | None, fmt: str,
                  fill: bool = False, output: str | None = None) -> None:
    """One task and one conversation, checked as the verifier checks a synthetic one (envs/verify.py); a tool
    message that differs from the replay shows the replay's text. ``fill``: the conversation with its tool
    messages filled from the replay, printed (or written to ``output``, then verified)."""
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
    from evosyn.envs.replay import fill_observations

    filled, changed = fill_observations(dom, task.initial_state, messages)
    if fill:
        text = json.dumps({"messages": [m.model_dump(mode="json", exclude_defaults=True) for m in filled],
                           "termination": termination}, indent=1)
        if output is None:
            click.echo(text)
            return
        from evosyn.flows.inputs import check_output, writing
        from evosyn.storage import atomic

        out = check_output(output, "--output")
        with writing(out, "--output"):
            atomic.write_text(out, text + "\n")
        click.echo(f"wrote {out}: {len(changed)} tool outputs filled from the replay")
        messages, changed = filled, []
    outcome = run_checks(dom, task, messages, termination=termination)
    # what each differing (or missing) tool message should hold: a hand-typed output matches it byte for byte
    differs = [s for s in changed if s.recorded is None or (s.recorded.content or "") != s.observed]
    verdict = {"domain": domain, "task_id": task.id, "passed": outcome.passed, "reward": outcome.reward,
               "checks": [c.model_dump() for c in outcome.checks], "observed": outcome.observed,
               "observations": [{"tool": s.call.name, "call_id": s.call.id, "expected": s.observed,
                                 "recorded": None if s.recorded is None else s.recorded.content} for s in differs]}
    if fmt == "json":
        click.echo(json.dumps(verdict, indent=2))
    else:
        # the benchmark's reward can be 1.0 while a strict check fails (a gold action skipped but the end
        # state right): say which of the two the verdict follows. A domain with no benchmark has no such reward
        # (its reward is its checks' rule): none is named
        verdict_line = "passed every check" if outcome.passed else "failed (a check below failed)"
        reward = f"; {dom.benchmark}'s reward: {outcome.reward:.1f}" if dom.benchmark else ""
        print_table(f"{domain} / task {task.id}: {verdict_line}{reward}", ["check", "result", "reason"],
                    [[c.name, "skipped" if c.skipped else "passed" if c.passed else "FAILED", c.reason]
                     for c in outcome.checks])
        click.echo("observed: " + "; ".join(f"{k}={','.join(v)}" for k, v in sorted(outcome.observed.items())))
        for s in differs:
            said = "has no tool message after it" if s.recorded is None else "differs from the replay"
            click.echo(f"replay: {s.call.name} ({s.call.id}) {said}; expected, byte for byte: {s.observed}")
        if differs:
            click.echo("(--fill-observations --output FILE fills every tool message from the replay)")
    if not outcome.passed:
        raise SystemExit(1)
