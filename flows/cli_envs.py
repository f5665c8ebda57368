"""`evosyn envs …` and `evosyn verify`."""
from __future__ import annotations

from collections import Counter

import click

from flows.cli_app import UserError, main
from flows.render import print_table


def _domain(name: str | None, option: str = "--domain"):
    from envs.packs import get_domain
    from flows.inputs import check_domain

    return get_domain(check_domain(name, option))


@main.group()
def envs() -> None:
    """Environments (one per domain pack with an environment)."""


@envs.command("list")
def envs_list() -> None:
    """Known domains (those with an environment)."""
    from envs.packs import known

    for name in known(with_environment=True):
        click.echo(name)


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
@click.option("--official", is_flag=True, required=True,
              help="Verify a trajectory built from each official task's gold actions.")
@click.option("--split", default="base", show_default=True)
def verify(domain: str, official: bool, split: str) -> None:
    """Verify trajectories built from the official tasks' gold actions."""
    from envs.gold import gold_messages
    from envs.verify import run_checks

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
