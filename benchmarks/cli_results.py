"""`evosyn bench results`: benchmarks/RESULTS.md written from the recorded JSON (benchmarks/results.py)."""
from __future__ import annotations

import click

from evosyn.benchmarks.results import RESULTS_DIR, RESULTS_MD
from evosyn.flows.cli_app import PATH, UserError


@click.command("results")
@click.option("--input", "input_dir", type=PATH, default=str(RESULTS_DIR), show_default=True,
              help="The folder of recorded benchmark JSON.")
@click.option("--output", type=PATH, default=str(RESULTS_MD), show_default=True)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the file differs from what the JSON gives.")
def bench_results(input_dir: str, output: str, check: bool) -> None:
    """Write benchmarks/RESULTS.md from the recorded JSON: per benchmark, the command, machine, seeds, spread."""
    from pathlib import Path

    from evosyn.benchmarks.results import render
    from evosyn.flows.inputs import check_output, writing
    from evosyn.storage import atomic

    source = Path(input_dir)
    if not source.is_dir():
        raise UserError(f"--input {input_dir}: not a folder")
    try:
        text = render(source)
    except (ValueError, KeyError, TypeError) as exc:  # a JSON that is not a benchmark's (or is cut short)
        raise UserError(f"--input {input_dir}: a file is not a benchmark's JSON ({type(exc).__name__}: {exc})") \
            from None
    target = Path(output)
    if check:
        current = target.read_text() if target.is_file() else None
        if current != text:
            click.echo(f"{output} is out of date: run `evosyn bench results`", err=True)
            raise SystemExit(1)
        click.echo(f"{output} is up to date")
        return
    target = check_output(output, "--output")
    with writing(target, "--output"):
        atomic.write_text(target, text)
    click.echo(f"wrote {target}")
