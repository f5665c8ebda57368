"""`evosyn testsets`: build or show a domain's fixed test sets."""
from __future__ import annotations

import click

from evosyn.flows.cli_app import main
from evosyn.flows.cli_fields import FieldIntRange
from evosyn.flows.inputs import store_from
from evosyn.flows.render import print_table


def _marginal(counts: dict[str, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in counts.items())


def show(report: dict) -> None:
    """The report of one set: the one-line summary, then its cells (official-matched) or marginals (uniform)."""
    from evosyn.tasks.testset import report_line

    click.echo(report_line(report))
    if report["kind"] == "uniform":
        print_table(f"{report['run_id']}: marginals of the drawn properties (requested = realized where gated)",
                    ["property", "requested", "TV from uniform"],
                    [[k, _marginal(report["requested_marginals"][k]), f"{report['tv_from_uniform'][k]:.3f}"]
                     for k in report["drawn"]])
        return
    keys = ("task_family", "expected_outcome", "num_write", "num_read")
    realized = {tuple(r[k] for k in keys): r["value"] for r in report["realized"]}
    rows = [[*(r[k] for k in keys), f"{r['value']:.3f}", f"{realized.get(tuple(r[k] for k in keys), 0.0):.3f}"]
            for r in report["official"]]
    print_table(f"{report['run_id']}: official vs realized share per cell", [*keys, "official", "realized"], rows)
    if report["unrealized"]:
        print_table("cells the generator did not realize", [*keys, "official tasks", "reason"],
                    [[*(u[k] for k in keys), u["official_tasks"], u["reason"][:80]] for u in report["unrealized"]])


@main.command()
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--n", "n", type=FieldIntRange("RunConfig.test_size"), default=300, show_default=True,
              help="Tasks per set (a run's test_size).")
@click.pass_context
def testsets(ctx, domain: str | None, n: int) -> None:
    """Build (once per store) or show the domain's two fixed test sets and what each realized."""
    from evosyn.flows.compile import compile_domain
    from evosyn.tasks.testset import KINDS, skipped_line, test_cases, test_set_report

    env = compile_domain(domain, generator=True, run=True).env  # the uniform set draws on controllable
    store = store_from(ctx)
    for kind in KINDS:
        if (skipped := skipped_line(env, kind)) is not None:
            click.echo(skipped)
            continue
        test_cases(store, env, n=n, kind=kind)
        show(test_set_report(store, env, n=n, kind=kind))
