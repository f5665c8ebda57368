"""`evosyn bench query`: DuckDB over a million evaluation rows in the store's own layout."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from evosyn.flows.cli_app import PATH
from evosyn.flows.render import print_table


@click.command("query")
@click.option("--rows", "n_rows", type=click.IntRange(1), default=1_000_000, show_default=True)
@click.option("--runs", type=click.IntRange(8), default=50, show_default=True, help="Runs (partitions: runs x rounds).")
@click.option("--rounds", type=click.IntRange(1), default=3, show_default=True)
@click.option("--repeat", type=click.IntRange(1), default=5, show_default=True, help="Timed repetitions (best kept).")
@click.option("--store", "store_dir", type=PATH, default=None,
              help="Build the benchmark store here and keep it (reused while alike); default: a temporary folder.")
@click.option("--output", type=PATH, default=None)
def bench_query(n_rows: int, runs: int, rounds: int, repeat: int, store_dir: str | None, output: str | None) -> None:
    """One run's rows and a per-slice success query over a million evaluations, and `evosyn query` start-up."""
    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.query import rows, run
    from evosyn.flows.inputs import bench_output, check_output, writing

    target = bench_output("query", output)
    if store_dir is not None:
        root = check_output(store_dir, "--store", kind="dir")
        result = run(root, n_rows, runs, rounds, repeat)
    else:
        with tempfile.TemporaryDirectory(prefix="evosyn-bench-query-") as tmp:
            result = run(Path(tmp) / "store", n_rows, runs, rounds, repeat)
    built = f"built in {result['build_s']:.0f} s" if result["build_s"] else "reused"
    print_table(f"DuckDB over {result['rows']:,} evaluations, {runs} runs x {rounds} rounds (store {built}); "
                f"best of {repeat}", ["query", "wall", "CPU", "target", ""], rows(result))
    slices = ", ".join(f"{s['num_write']}: {s['success']:.3f} (n={s['n']})" for s in result["slices"])
    click.echo(f"success by num_write: {slices}; typed column and JSON agree: {result['slices_agree']}; "
               f"one run = {result['one_run_rows']:,} rows; load average {result['load_average'][0]:.1f} on "
               f"{os.cpu_count()} CPUs")
    click.echo(("PASS" if result["passed"] else "FAIL") + ": targets one run <= 30 ms, slice <= 100 ms, "
               "`evosyn query \"select 1\"` <= 400 ms (wall)")
    with writing(target, "--output"):
        click.echo(f"wrote {write_json('query', result, target)}")
    if not result["passed"]:
        raise SystemExit(1)
