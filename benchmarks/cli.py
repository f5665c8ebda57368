"""`evosyn bench …`: the benchmarks' command group, attached at the CLI's root through the ``evosyn.commands``
entry point (pyproject.toml), so ``flows`` never imports ``benchmarks``.

Each benchmark's command lives in a ``benchmarks/cli_*.py`` module as a plain click command; this module
gathers them into the group. ``evosyn bench results`` writes benchmarks/RESULTS.md from the recorded JSON.
"""
from __future__ import annotations

import click

from evosyn.benchmarks.cli_faults import bench_faults
from evosyn.benchmarks.cli_learning import bench_discovery, bench_learning
from evosyn.benchmarks.cli_llm import bench_llm
from evosyn.benchmarks.cli_query import bench_query
from evosyn.benchmarks.cli_results import bench_results
from evosyn.benchmarks.cli_run import bench_run
from evosyn.benchmarks.cli_served import bench_served
from evosyn.benchmarks.cli_sweep import bench_sweep
from evosyn.benchmarks.cli_stages import (
    bench_learner,
    bench_synth,
    bench_testsets,
    bench_verify,
)
from evosyn.benchmarks.common import START, started


@click.group()
@click.option("--note", default=None, metavar="TEXT",
              help="A note on the machine recorded in the JSON (e.g. the CPUs are shared with other jobs).")
@click.pass_context
def bench(ctx: click.Context, note: str | None) -> None:
    """Benchmarks: print a table and write JSON (bench-results/ by default)."""
    ctx.meta[START] = started(note)  # before the command's own work: its load at start and its wall time


for command in (bench_discovery, bench_faults, bench_learner, bench_learning, bench_llm, bench_query, bench_results,
                bench_run, bench_served, bench_sweep, bench_synth, bench_testsets, bench_verify):
    bench.add_command(command)
