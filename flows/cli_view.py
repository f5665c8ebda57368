"""`evosyn show`, `evosyn runs`, `evosyn preview`: looking at the data without reading JSON."""
from __future__ import annotations

import json

import click

from evosyn.flows.cli_app import UserError, main
from evosyn.flows.inputs import POINT_ELSEWHERE, check_seed, open_store


@main.command()
@click.argument("record_id")
@click.option("--json", "as_json", is_flag=True, help="Print the raw record(s) as JSON.")
@click.option("--full", is_flag=True, help="Show tool results in full (default: cut at 400 characters).")
@click.pass_context
def show(ctx, record_id: str, as_json: bool, full: bool) -> None:
    """Show a blueprint, task, trajectory, verdict (or run, training example, evaluation) by its id.

    An id names its own record and the records downstream of it: a task id also
    shows its trajectories and verdicts, a blueprint id the whole chain.
    """
    from evosyn.tasks.reports.browse import KINDS, find

    home = ctx.obj.get("home")
    store = open_store(home, create=False)
    found = find(store, record_id)
    if not found:
        kinds = ", ".join(k for k, _, _ in KINDS)
        raise UserError(f"{record_id}: no record with this id ({kinds}) in the store at "
                        f"{store.where()}; list its runs with `evosyn runs`, or {POINT_ELSEWHERE}")
    if as_json:
        click.echo(json.dumps([{"kind": f.kind, "table": f.table, "matched": f.via,
                                "record": f.record.model_dump(mode="json")} for f in found], indent=1))
        return
    from evosyn.flows.view import console, record_view

    out = console()
    counts: dict[str, int] = {}
    for f in found:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    plural = {"trajectory": "trajectories"}
    out.print(f"{record_id}: " + ", ".join(f"{n} {plural.get(k, k + 's') if n > 1 else k}" for k, n in counts.items())
              + f" (store {store.where()})", highlight=False, markup=False)
    benchmarks = _benchmarks(store, [f.record for f in found])
    for f in found:
        benchmark = benchmarks.get(f.record.verdict_id, "") if f.kind == "verdict" else ""
        out.print(record_view(f.record, None if full else 400, benchmark))


def _benchmarks(store, records) -> dict[str, str]:
    """Verdict id -> the benchmark whose reward rule its domain computes (``Domain.benchmark``; "" for a domain of
    one's own, whose verdict then names no reward). A verdict's domain is its task's: among the records found, else
    read from its run's tasks."""
    from evosyn.flows.compile import stored_domain
    from evosyn.storage.records import SynthTask, Verdict

    verdicts = [r for r in records if isinstance(r, Verdict)]
    domains = {r.task_id: r.domain for r in records if isinstance(r, SynthTask)}
    for run_id, round in {(v.run_id, v.round) for v in verdicts if v.task_id not in domains}:
        domains.update((t["task_id"], t["domain"]) for t in store.read_fields("tasks", ["task_id", "domain"],
                                                                                run_id=run_id, round=round))
    names = {domains[v.task_id] for v in verdicts if v.task_id in domains}
    benchmark = {name: stored_domain(name).benchmark for name in names}
    return {v.verdict_id: benchmark.get(domains.get(v.task_id, ""), "") for v in verdicts}


@main.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
def runs(ctx, fmt: str) -> None:
    """List the store's runs: closed-loop runs, `evosyn synth` passes and test sets."""
    from evosyn.tasks.overlap import OVERLAP_WARN
    from evosyn.tasks.reports.browse import run_overview

    store = open_store(ctx.obj.get("home"), create=False)
    rows = run_overview(store)
    root = store.where()
    if fmt == "json":
        click.echo(json.dumps({"store": str(root), "runs": [r.model_dump(mode="json") for r in rows]}, indent=1))
        return
    click.echo(f"store {root}: {len(rows)} run{'s' if len(rows) != 1 else ''}")
    if not rows:
        click.echo("nothing yet: `evosyn run` or `evosyn synth` writes one")
        return
    from evosyn.flows.render import print_table

    def last_test(r) -> str:  # a domain with no official tasks is scored on its uniform set: said so
        uniform = "uniform, " if r.test_set == "uniform" else ""
        return "" if r.test_success is None else f"{r.test_success:.3f} ({uniform}round {r.test_round})"

    print_table(None, ["run", "kind", "domain", "arm", "seed", "rounds", "status", "verified", "last test",
                       "test overlap", "created"],
                [[r.run_id, r.kind, r.domain, r.arm, r.seed, f"{r.rounds_done}/{r.rounds_asked or '?'}", r.status,
                  r.verified, last_test(r), "" if r.test_overlap is None else f"{r.test_overlap:.0%}",
                  r.created_at.strftime("%Y-%m-%d %H:%M") if r.created_at else ""] for r in rows])
    warned = [r for r in rows if r.test_overlap is not None and r.test_overlap > OVERLAP_WARN]
    for r in warned:  # training data that copies the test sets: the score beside it overstates
        click.echo(f"warning: {r.run_id}: {r.test_overlap:.0%} of its training tasks are near copies of test-set "
                   f"tasks (threshold {OVERLAP_WARN:.0%}); `evosyn dedup --run {r.run_id}` lists them")


@main.command()
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--n", "n", type=click.IntRange(1, 50), default=5, show_default=True, help="Samples.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--full", is_flag=True, help="Show tool results in full (default: cut at 400 characters).")
def preview(domain: str | None, n: int, seed: int, full: bool) -> None:
    """Synthesize a handful of samples with the embedded backend and show them; writes nothing to the store."""
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.view import console, sample_view
    from evosyn.tasks.reports.browse import preview as run_preview

    check_seed(seed)
    env = compile_domain(domain, generator=True).env
    domain = env.name
    samples = run_preview(env, n, seed)
    out = console()
    for i, s in enumerate(samples, 1):
        for part in sample_view(i, len(samples), s, None if full else 400, env.benchmark):
            out.print(part)
    kept = sum(1 for s in samples if s.verdict is not None and s.verdict.passed)
    click.echo(f"\npreview: {len(samples)} samples on {domain} (seed {seed}), {kept} verified; nothing was "
               f"written to the store (`evosyn synth --domain {domain} --n N --seed {seed}` writes a pass)")
