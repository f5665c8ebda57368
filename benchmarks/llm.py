"""`evosyn bench llm`: the LLM client against a provider-like server: seconds of latency, an rpm limit.

``calls`` Planner-shaped structured calls at concurrency ``C`` against
``evosyn.benchmarks.limited_llm_server`` in its own process: lognormal latencies (mean
``L``, seeded) and a requests-per-minute limit it enforces with 429s and
``retry-after``, as a hosted model does. The client is not told the limit: it
meets it. No client can beat the bound ``min(C / L, rpm / 60)`` calls a second
(``L`` as the server served it, the mean of its latencies); the target is a
throughput within 5% of it with no failed call. Then the same calls from a fresh
client over the warm cache: the server must count no request.

The throughput is the steady one: calls completed between the 10% and 90%
completion marks over the time between them. The first reply cannot come
before a latency, and the last calls' latencies end the run whatever the client
does; with a few hundred calls those two would weigh more than the client. The
wall-clock rate (calls / wall time) is reported beside it. The bound is a mean
over a steady state; a run of a few hundred lognormal latencies reads a few
percent either side of it. So beside it stands the same measure for a client
with no overhead that knows the limit, on the latencies the server served
(``ideal_completions``): the share of that is what the client itself costs.
"""
from __future__ import annotations

import asyncio
import heapq
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from evosyn.agents import servers


# ---------------------------------------------------------------- a Planner-shaped output (mirrors a Blueprint)
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Selection(_Strict):
    dimension: str
    values: list[str]


class Controls(_Strict):
    num_write: str
    num_turns: str
    requires_confirmation: bool


class PlannedBlueprint(_Strict):
    plan_id: str
    generation_intent: str
    selected_dimensions: list[Selection]
    success_focus: list[str]
    diversity_notes: list[str]
    expected_difficulty_controls: Controls


def planner_reply(request) -> dict[str, Any]:
    """The fake server's answer: a valid blueprint echoing which plan was asked for."""
    from evosyn.benchmarks.fake_llm_server import answer

    asked = request.body["messages"][-1]["content"]  # Anthropic's: a list of content blocks
    text = asked if isinstance(asked, str) else " ".join(b.get("text", "") for b in asked if isinstance(b, dict))
    return answer(request, {
        "plan_id": text.rsplit(" ", 1)[-1], "generation_intent": "change the booking of a loyal customer",
        "selected_dimensions": [{"dimension": "intent", "values": ["update_booking"]},
                                {"dimension": "num_write", "values": ["2"]}],
        "success_focus": ["the new booking is made", "the price difference is charged"],
        "diversity_notes": ["a one-way trip"],
        "expected_difficulty_controls": {"num_write": "2", "num_turns": "6-10", "requires_confirmation": True}})


def planner_messages(i: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are the Planner. Turn a direction into one blueprint. "
                                          "Use only keys of the current synthesis space."},
            {"role": "user", "content": f"Direction: booking changes with payment. Write blueprint plan-{i}"}]


# ---------------------------------------------------------------- the server, in its own process
class _ServerProcess:
    """The provider-like server in a process of its own (the client's event loop must not share its CPU with the
    server's), run through ``evosyn.agents.servers`` like every server the project starts."""

    def __init__(self, latency_s: float, sigma: float, rpm: int, seed: int, log: Path):
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        self.port = servers.free_port()
        self.proc = servers.start(
            [sys.executable, "-m", "evosyn.benchmarks.limited_llm_server", "--port", str(self.port), "--latency",
             str(latency_s), "--sigma", str(sigma), "--rpm", str(rpm), "--seed", str(seed),
             "--responder", "evosyn.benchmarks.llm:planner_reply"], log, env=env, append=False, die_with_parent=True)
        try:
            servers.wait_ready(self.proc, lambda: servers.http_ok(f"http://{servers.HOST}:{self.port}/stats")
                               and servers.listens(self.proc, self.port), timeout=60, interval=0.1)
        except (servers.ServerExited, servers.ServerNotReady) as exc:
            self.close()
            raise RuntimeError(f"the LLM server did not start ({exc}): {servers.log_tail(log)}") from None

    def stats(self) -> dict[str, Any]:
        with servers.open_url(f"http://{servers.HOST}:{self.port}/stats", timeout=10) as resp:
            return json.loads(resp.read())

    def close(self) -> None:
        servers.stop(self.proc, grace=10)


MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5", "openai_compatible": "Qwen/Qwen3-8B"}
TARGET = 0.95  # of the bound


async def _pass(client, calls: int) -> tuple[float, list[float], list]:
    """Wall seconds, each successful call's completion time (seconds from the start), and each outcome."""
    t0 = time.perf_counter()
    done: list[float] = []

    async def one(i: int):
        result = await client.chat(planner_messages(i), schema=PlannedBlueprint)
        done.append(time.perf_counter() - t0)  # a failed call is no throughput
        return result

    results = await asyncio.gather(*[one(i) for i in range(calls)], return_exceptions=True)
    return time.perf_counter() - t0, sorted(done), results


def steady_rate(done: list[float]) -> float:
    """Calls a second between the 10% and 90% completion marks (fill and drain left out)."""
    lo, hi = int(len(done) * 0.1), max(int(len(done) * 0.9) - 1, 0)
    if hi <= lo or done[hi] <= done[lo]:
        return len(done) / done[-1] if done and done[-1] > 0 else 0.0
    return (hi - lo) / (done[hi] - done[lo])


def ideal_completions(latencies: list[float], concurrency: int, rpm: int) -> list[float]:
    """When each call would complete for a client with no overhead that knows the limit: the same
    latencies, in the order the server met them, on ``concurrency`` slots, paced by the server's own
    bucket (``rpm / 60`` a second, one second of requests at most, full at the start)."""
    free, done = [0.0] * concurrency, []
    rate = rpm / 60 if rpm else 0.0
    tokens, stamp, last = max(1.0, rate), 0.0, 0.0
    for latency in latencies:
        start = max(heapq.heappop(free), last)
        if rate:
            tokens = min(max(1.0, rate), tokens + (start - stamp) * rate)
            if tokens < 1.0:
                start, tokens = start + (1.0 - tokens) / rate, 1.0
            tokens, stamp = tokens - 1.0, start
        last = start
        done.append(start + latency)
        heapq.heappush(free, start + latency)
    return sorted(done)


def run(calls: int = 200, concurrency: int = 32, latency_s: float = 1.5, sigma: float = 0.5, rpm: int = 600,
        seed: int = 0, provider: str = "openai_compatible") -> dict[str, Any]:
    from evosyn.agents.llm import make_client
    from evosyn.config import RoleConfig

    os.environ.setdefault("EVOSYN_BENCH_FAKE_KEY", "sk-bench-not-a-real-key")
    with tempfile.TemporaryDirectory(prefix="evosyn-bench-llm-") as work:
        cache_dir = Path(work) / "cache"
        server = _ServerProcess(latency_s, sigma, rpm, seed, Path(work) / "server.log")
        try:
            base = f"http://127.0.0.1:{server.port}" + ("" if provider == "anthropic" else "/v1")
            # the client is not told the limit (no rpm): it meets the server's 429s, as a user who set none
            cfg = RoleConfig(backend="llm", provider=provider, model=MODELS[provider], base_url=base,
                             api_key_env="EVOSYN_BENCH_FAKE_KEY", max_concurrency=concurrency, max_tokens=1024)
            cold_client = make_client("planner", cfg, cache_dir=cache_dir)
            warm_client = make_client("planner", cfg, cache_dir=cache_dir)  # a rerun: a new client
            try:
                cpu0 = time.process_time()
                cold_s, done, cold = asyncio.run(_pass(cold_client, calls))
                cold_cpu = time.process_time() - cpu0
                after_cold = server.stats()
                warm_s, _, warm = asyncio.run(_pass(warm_client, calls))
                after_warm = server.stats()
            finally:
                cold_client.close()
                warm_client.close()
        finally:
            server.close()
    served = after_cold["latencies"]
    served_latency = sum(served) / max(len(served), 1)
    by_concurrency, by_rpm = concurrency / served_latency, rpm / 60 if rpm else float("inf")
    bound = min(by_concurrency, by_rpm)
    steady, ideal = steady_rate(done), steady_rate(ideal_completions(served, concurrency, rpm))
    failed = [r for r in cold if isinstance(r, BaseException)]
    valid = sum(not isinstance(r, BaseException) and isinstance(r.parsed, PlannedBlueprint)
                and r.parsed.plan_id == f"plan-{i}" for i, r in enumerate(cold))
    warm_requests = after_warm["requests"] - after_cold["requests"]
    return {"provider": provider, "calls": calls, "concurrency": concurrency, "latency_s": latency_s,
            "latency_sigma": sigma, "rpm": rpm, "seed": seed, "served_mean_latency_s": served_latency,
            "bound_calls_per_s": bound, "binding": "rpm" if by_rpm <= by_concurrency else "concurrency",
            "cold_s": cold_s, "wall_calls_per_s": calls / cold_s, "steady_calls_per_s": steady,
            "of_bound": steady / bound, "ideal_steady_calls_per_s": ideal, "of_ideal": steady / ideal,
            "failed_calls": len(failed),
            "first_failure": f"{type(failed[0]).__name__}: {failed[0]}"[:300] if failed else "",
            "valid_outputs": valid, "cold_http_requests": after_cold["requests"],
            "rate_limited": after_cold["rate_limited"], "server_max_in_flight": after_cold["max_in_flight"],
            "client_cpu_ms_per_call": cold_cpu / calls * 1000, "load_average": os.getloadavg(),
            "warm_s": warm_s, "warm_http_requests": warm_requests,
            "warm_cache_hits": sum(not isinstance(r, BaseException) and r.cache_hit for r in warm),
            "warm_identical": all(not isinstance(a, BaseException) and not isinstance(b, BaseException)
                                  and a.parsed == b.parsed for a, b in zip(cold, warm)),
            "target": TARGET,
            "passed": steady / bound >= TARGET and not failed and valid == calls and warm_requests == 0}


HEADERS = ["concurrency", "pass", "bound", "throughput", "of bound", "of ideal client", "HTTP requests", "429s",
           "outputs", "client CPU/call"]


def title(calls: int, latency_s: float, sigma: float, rpm: int, provider: str) -> str:
    return (f"llm client benchmark: {calls} Planner calls, latency lognormal mean {latency_s:g} s (sigma {sigma:g}), "
            f"{f'{rpm} rpm limit' if rpm else 'no rpm limit'} ({provider})")


def rows(result: dict[str, Any]) -> list[list[Any]]:
    n, c = result["calls"], result["concurrency"]
    return [[c, "cold cache", f"{result['bound_calls_per_s']:.2f}/s ({result['binding']})",
             f"{result['steady_calls_per_s']:.2f}/s (wall {result['wall_calls_per_s']:.2f}/s)",
             f"{result['of_bound']:.1%} (>= {result['target']:.0%})", f"{result['of_ideal']:.1%}",
             result["cold_http_requests"],
             result["rate_limited"], f"{result['valid_outputs']}/{n} valid, {result['failed_calls']} failed",
             f"{result['client_cpu_ms_per_call']:.2f} ms"],
            [c, "warm cache (rerun)", "", f"{n / result['warm_s']:.0f}/s", "", "", result["warm_http_requests"], 0,
             f"{result['warm_cache_hits']}/{n} cache hits", ""]]


def summary(result: dict[str, Any]) -> str:
    r = result
    return (f"{'PASS' if r['passed'] else 'FAIL'} at concurrency {r['concurrency']}: {r['of_bound']:.1%} of the "
            f"bound {r['bound_calls_per_s']:.2f} calls/s (set by {r['binding']}; target >= {r['target']:.0%}), "
            f"{r['of_ideal']:.1%} of a client with no overhead on the same latencies, "
            f"{r['failed_calls']} failed calls (target 0), {r['rate_limited']} 429s met, "
            f"{r['warm_http_requests']} HTTP requests on the warm rerun (target 0); served mean latency "
            f"{r['served_mean_latency_s']:.2f} s" + (f"; first failure: {r['first_failure']}" if r["failed_calls"]
                                                     else ""))
