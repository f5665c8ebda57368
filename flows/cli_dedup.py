"""`evosyn dedup`: the dedup stage's check (near copies, contamination) over any run of the store."""
from __future__ import annotations

import json

import click

from evosyn.flows.cli_app import UserError, main
from evosyn.flows.cli_fields import FieldFloatRange
from evosyn.flows.inputs import store_from
from evosyn.flows.render import print_table

COLUMNS = ["checked", "flagged", "duplicate", "official", "official_test", "test_set"]


@main.command()
@click.option("--run", "run_id", required=True, help="A run (or `evosyn synth` pass) of the store.")
@click.option("--threshold", type=FieldFloatRange("DedupConfig.threshold"), default=None,
              help="MinHash Jaccard of two instructions that counts as near [default: the run's config, else 0.8].")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
def dedup(ctx, run_id: str, threshold: float | None, fmt: str) -> None:
    """Flag near copies among a run's verified tasks, of the domain's official tasks and of its test sets.

    Writes the `dedup` table (a run's rounds checked with its own settings are read back, not redone) and
    prints the counts per round; `evosyn query` reads the rows.
    """
    from evosyn.flows.compile import stored_domain
    from evosyn.tasks.dedup import check_run, run_settings

    store = store_from(ctx, runs=(run_id,), option="--run", any_table=True)
    if run_id.startswith(("testset-", "probeset-")):
        raise UserError(f"--run {run_id}: a test set is checked with each run scored on it; pass that run")
    domain, cfg, test_size = run_settings(store, run_id)
    if domain is None:
        raise UserError(f"--run {run_id}: no task in the store to check")
    if threshold is not None and threshold != cfg.threshold:
        if cfg.drop:  # its rounds trained without the tasks its own threshold flagged
            raise UserError(f"--threshold {threshold:g}: run {run_id} trained without the tasks its own threshold "
                            f"({cfg.threshold:g}) flagged (dedup.drop); leave --threshold out")
        cfg = cfg.model_copy(update={"threshold": threshold})
    result = check_run(store, stored_domain(domain), run_id, cfg, test_size)
    if fmt == "json":
        click.echo(json.dumps(result.model_dump(mode="json"), indent=1))
        return
    rows = [[f"round {r}", *(getattr(c, k) for k in COLUMNS)] for r, c in result.rounds.items()]
    if result.test_set_ids:
        rows.append(["test sets", *(getattr(result.test_sets, k) for k in COLUMNS)])
    print_table(f"{run_id} ({result.domain}, {result.params})", ["", *COLUMNS], rows)
    if not result.rounds:
        click.echo(f"run {run_id} has no verified task yet")
    if not result.test_set_ids:
        click.echo(f"no {result.domain} test set of {test_size} tasks in this store: `evosyn testsets --domain "
                   f"{result.domain} --n {test_size}` builds them, then rerun this command to check against them")
    click.echo(f"the flagged tasks: evosyn query \"select round, task_id, split, flags, duplicate_of, official_task, "
               f"test_set_task from dedup where run_id = '{run_id}' and flagged order by all\"")
