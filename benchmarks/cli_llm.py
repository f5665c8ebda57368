"""`evosyn bench llm`: the LLM client against a local server with a fixed latency."""
from __future__ import annotations

import os

import click

from flows.cli_app import PATH, UserError
from flows.render import print_table


@click.command("llm")
@click.option("--calls", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--concurrency", default="64,256", show_default=True,
              help="Concurrencies to measure, comma-separated (each with its own server and cache).")
@click.option("--latency", type=click.FloatRange(0.001), default=0.2, show_default=True,
              help="Seconds the local server waits before each reply.")
@click.option("--provider", type=click.Choice(["openai_compatible", "openai", "anthropic"]),
              default="openai_compatible", show_default=True, help="Which SDK path to drive.")
@click.option("--output", type=PATH, default=None)
def bench_llm(calls: int, concurrency: str, latency: float, provider: str, output: str | None) -> None:
    """Planner-shaped structured calls: throughput vs the ideal, then a rerun over the warm cache."""
    from benchmarks.common import write_json
    from benchmarks.llm import rows, run
    from flows.inputs import bench_output, writing

    try:
        levels = [int(c) for c in concurrency.split(",")]
        if not levels or any(not 1 <= c <= 1024 for c in levels):
            raise ValueError
    except ValueError:
        raise UserError(f"--concurrency {concurrency!r}: give numbers from 1 to 1024, comma-separated "
                        "(e.g. 64,256)") from None
    target = bench_output(f"llm-{provider}", output)
    results = [run(calls, c, latency, provider) for c in levels]
    print_table(f"llm client benchmark: {calls} Planner calls, {latency * 1000:.0f} ms server latency ({provider})",
                ["concurrency", "pass", "wall", "calls/s", "of ideal", "HTTP requests", "outputs", "client CPU/call"],
                [row for r in results for row in rows(r)])
    for r in results:
        click.echo(f"{'PASS' if r['passed'] else 'FAIL'} at concurrency {r['concurrency']}: {r['efficiency']:.1%} "
                   f"of ideal throughput (target >= {r['target']:.0%}), {r['warm_http_requests']} HTTP requests on "
                   f"the warm rerun (target 0); CPU per call: client {r['client_cpu_ms_per_call']:.2f} ms, server "
                   f"{r['server_cpu_ms_per_call']:.2f} ms; a bare aiohttp session reaches {r['floor_efficiency']:.1%} "
                   f"({r['floor_cpu_ms_per_call']:.2f} ms CPU per call), raw asyncio sockets "
                   f"{r['raw_floor_efficiency']:.1%} ({r['raw_floor_cpu_ms_per_call']:.2f} ms)"
                   + (f"; the client's own work without HTTP {r['client_work_cpu_ms_per_call']:.2f} ms a call"
                      if r.get("client_work_cpu_ms_per_call") is not None else ""))
    click.echo(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    payload = {**results[0], "runs": results, "passed": all(r["passed"] for r in results)}
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'llm-{provider}', payload, target)}")
    if not payload["passed"]:
        raise SystemExit(1)
