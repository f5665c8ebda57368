"""`evosyn bench llm`: the LLM client against a local server with a fixed latency."""
from __future__ import annotations

import os

import click

from flows.cli_app import PATH, bench
from flows.render import print_table


@bench.command("llm")
@click.option("--calls", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 1024), default=64, show_default=True)
@click.option("--latency", type=click.FloatRange(0.001), default=0.2, show_default=True,
              help="Seconds the local server waits before each reply.")
@click.option("--provider", type=click.Choice(["openai_compatible", "openai", "anthropic"]),
              default="openai_compatible", show_default=True, help="Which SDK path to drive.")
@click.option("--output", type=PATH, default=None)
def bench_llm(calls: int, concurrency: int, latency: float, provider: str, output: str | None) -> None:
    """Planner-shaped structured calls: throughput vs the ideal, then a rerun over the warm cache."""
    from benchmarks.common import write_json
    from benchmarks.llm import rows, run
    from flows.inputs import bench_output, writing

    target = bench_output(f"llm-{provider}", output)
    result = run(calls, concurrency, latency, provider)
    print_table(f"llm client benchmark: {calls} Planner calls, concurrency {concurrency}, "
                f"{latency * 1000:.0f} ms server latency ({provider})",
                ["pass", "wall", "calls/s", "of ideal", "HTTP requests", "outputs"], rows(result))
    verdict = "PASS" if result["passed"] else "FAIL"
    click.echo(f"{verdict}: {result['efficiency']:.1%} of ideal throughput (target >= 90%), "
               f"{result['warm_http_requests']} HTTP requests on the warm rerun (target 0); CPU per call: "
               f"client {result['client_cpu_ms_per_call']:.2f} ms, server {result['server_cpu_ms_per_call']:.2f} ms; "
               f"load average {result['load_average'][0]:.1f} on {os.cpu_count()} CPUs")
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'llm-{provider}', result, target)}")
    if not result["passed"]:
        raise SystemExit(1)
