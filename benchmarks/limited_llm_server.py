"""A provider-like LLM server on 127.0.0.1 for `evosyn bench llm`: seconds of latency and an rpm limit.

What a user of a hosted model meets, on aiohttp's web server:

- latency: lognormal with the given mean and shape (``sigma``), drawn from a random stream seeded
  by ``seed`` and the request's messages, so a rerun of the same calls meets the same latencies
  whatever order they arrive in;
- a requests-per-minute limit: a token bucket refilled at ``rpm / 60`` a second that holds one
  second of requests (providers enforce a minute's limit over shorter periods: OpenAI documents
  60,000 a minute enforced as 1,000 a second). A request over it is refused at once with HTTP 429,
  ``retry-after`` in whole seconds (as HTTP writes it) and the limit headers providers send with
  every reply (OpenAI's ``x-ratelimit-*``, Anthropic's ``anthropic-ratelimit-requests-*``).

Routes: ``POST /v1/chat/completions`` and ``POST /v1/messages`` answered by a responder
(``respond(request) -> Reply | dict``, as ``evosyn.benchmarks.fake_llm_server``'s), ``GET /stats``.
Run standalone (the benchmark does, so the server has its own CPU and GIL):
``python -m evosyn.benchmarks.limited_llm_server --latency 1.5 --rpm 600 --responder evosyn.benchmarks.llm:planner_reply``
prints ``PORT <n>`` on its first line.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import time
from dataclasses import asdict, dataclass, field

from aiohttp import web

from evosyn.benchmarks.fake_llm_server import Reply, Request, Responder, _load, error


@dataclass
class Stats:
    requests: int = 0  # every POST, refused or not
    rate_limited: int = 0  # answered 429
    answered: int = 0  # answered by the responder
    latencies: list[float] = field(default_factory=list)  # served to the answered requests, in arrival order
    in_flight: int = 0
    max_in_flight: int = 0


class RequestBucket:
    """The server's limit: ``rpm / 60`` requests a second, at most one second of them at once."""

    def __init__(self, rpm: int):
        self.rpm, self.rate = rpm, rpm / 60.0
        self.capacity = max(1.0, self.rate)
        self.tokens, self._stamp = self.capacity, time.monotonic()

    def take(self) -> float | None:
        """None when the request may go on, else the seconds until the bucket holds one."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return (1.0 - self.tokens) / self.rate

    def headers(self, anthropic: bool) -> dict[str, str]:
        remaining = str(int(self.tokens))
        if anthropic:
            return {"anthropic-ratelimit-requests-limit": str(self.rpm),
                    "anthropic-ratelimit-requests-remaining": remaining}
        return {"x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-remaining-requests": remaining}


def latency_s(seed: int, body: dict, mean_s: float, sigma: float) -> float:
    """A lognormal latency with mean ``mean_s``, the same for the same seed and messages."""
    digest = hashlib.sha256(json.dumps([seed, body.get("messages")], sort_keys=True, default=str).encode()).digest()
    mu = math.log(mean_s) - sigma * sigma / 2  # the lognormal's mean is exp(mu + sigma^2 / 2)
    return random.Random(digest).lognormvariate(mu, sigma)


def make_app(respond: Responder, *, mean_latency_s: float, sigma: float = 0.5, rpm: int | None = None,
             seed: int = 0) -> web.Application:
    stats, bucket = Stats(), (RequestBucket(rpm) if rpm else None)

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        stats.requests += 1
        asked = Request(request.path, body, {k.lower(): v for k, v in request.headers.items()})
        limit = {}
        if bucket is not None:
            wait = bucket.take()
            limit = bucket.headers(asked.anthropic)
            if wait is not None:
                stats.rate_limited += 1
                refused = error(429, "rate limit reached for requests", retry_after=max(1, math.ceil(wait)),
                                anthropic=asked.anthropic)
                return web.json_response(refused.body, status=429, headers={**refused.headers, **limit})
        delay = latency_s(seed, body, mean_latency_s, sigma)
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            reply = respond(asked)
            reply = reply if isinstance(reply, Reply) else Reply(body=reply)
            await asyncio.sleep(delay + reply.delay_s)
        finally:
            stats.in_flight -= 1
        stats.answered += 1
        stats.latencies.append(delay)
        return web.json_response(reply.body, status=reply.status, headers={**reply.headers, **limit})

    async def stats_route(request: web.Request) -> web.Response:
        return web.json_response(asdict(stats))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/messages", chat)
    app.router.add_get("/stats", stats_route)
    return app


async def serve(app: web.Application, ready, port: int = 0) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    ready(runner.addresses[0][1])
    try:
        await asyncio.Event().wait()  # until the process is stopped
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=1.5, help="mean seconds before a reply")
    ap.add_argument("--sigma", type=float, default=0.5, help="the lognormal's shape (0: a fixed latency)")
    ap.add_argument("--rpm", type=int, default=0, help="requests a minute before 429s (0: no limit)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--port", type=int, default=0, help="the port to listen on (0: a free one, printed)")
    ap.add_argument("--responder", required=True, help="module:function answering each request")
    args = ap.parse_args(argv)
    app = make_app(_load(args.responder), mean_latency_s=args.latency, sigma=args.sigma, rpm=args.rpm or None,
                   seed=args.seed)
    try:
        asyncio.run(serve(app, ready=lambda port: print(f"PORT {port}", flush=True), port=args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
