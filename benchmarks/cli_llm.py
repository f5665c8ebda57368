"""`evosyn bench llm`: the LLM client against a local server with seconds of latency and an rpm limit."""
from __future__ import annotations

import os

import click

from evosyn.flows.cli_app import PATH, UserError
from evosyn.flows.render import print_table


@click.command("llm")
@click.option("--calls", type=click.IntRange(1), default=200, show_default=True)
@click.option("--concurrency", default="8,32", show_default=True,
              help="Concurrencies to measure, comma-separated (each with its own server and cache).")
@click.option("--latency", type=click.FloatRange(0.001), default=1.5, show_default=True,
              help="Mean seconds the local server takes to reply (lognormal).")
@click.option("--sigma", type=click.FloatRange(0.0), default=0.5, show_default=True,
              help="Spread of the latency (the lognormal's shape; 0: fixed).")
@click.option("--rpm", type=click.IntRange(0), default=600, show_default=True,
              help="Requests a minute the server allows before answering 429 (0: no limit).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the server's latencies.")
@click.option("--provider", type=click.Choice(["openai_compatible", "openai", "anthropic"]),
              default="openai_compatible", show_default=True, help="Which provider's protocol to drive.")
@click.option("--output", type=PATH, default=None)
def bench_llm(calls: int, concurrency: str, latency: float, sigma: float, rpm: int, seed: int, provider: str,
              output: str | None) -> None:
    """Planner-shaped structured calls: throughput vs the bound, 429s met, then a rerun over the warm cache."""
    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.llm import HEADERS, rows, run, summary, title
    from evosyn.flows.inputs import bench_output, writing

    try:
        levels = [int(c) for c in concurrency.split(",")]
        if not levels or any(not 1 <= c <= 1024 for c in levels):
            raise ValueError
    except ValueError:
        raise UserError(f"--concurrency {concurrency!r}: give numbers from 1 to 1024, comma-separated "
                        "(e.g. 8,32)") from None
    target = bench_output(f"llm-{provider}", output)
    results = [run(calls, c, latency, sigma, rpm, seed, provider) for c in levels]
    print_table(title(calls, latency, sigma, rpm, provider), HEADERS, [row for r in results for row in rows(r)])
    for r in results:
        click.echo(summary(r))
    click.echo(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    payload = {**results[0], "runs": results, "passed": all(r["passed"] for r in results)}
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'llm-{provider}', payload, target)}")
    if not payload["passed"]:
        raise SystemExit(1)
