"""The provider-like server: seeded lognormal latencies, and 429s with retry-after over its rpm limit."""
from __future__ import annotations

import asyncio
import statistics

import aiohttp

from evosyn.benchmarks.fake_llm_server import answer
from evosyn.benchmarks.limited_llm_server import RequestBucket, latency_s, make_app


def _echo(request):
    return answer(request, {"echo": request.body["messages"][-1]["content"]})


def _body(i: int) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": f"call {i}"}]}


def test_latencies_are_seeded_per_request_with_the_asked_mean():
    draws = [latency_s(7, _body(i), 1.5, 0.5) for i in range(4000)]
    assert draws[:50] == [latency_s(7, _body(i), 1.5, 0.5) for i in range(50)]  # the same request, the same wait
    assert draws[:50] != [latency_s(8, _body(i), 1.5, 0.5) for i in range(50)]  # another seed, others
    assert abs(statistics.fmean(draws) - 1.5) < 0.05 and statistics.pstdev(draws) > 0.5
    assert abs(latency_s(0, _body(1), 0.2, 0.0) - 0.2) < 1e-12  # sigma 0: a fixed latency


def test_the_bucket_holds_one_second_and_says_how_long_to_wait():
    bucket = RequestBucket(600)  # 10 a second
    assert [bucket.take() for _ in range(10)] == [None] * 10
    wait = bucket.take()
    assert wait is not None and 0.05 < wait <= 0.1
    assert bucket.headers(False)["x-ratelimit-limit-requests"] == "600"
    assert bucket.headers(True)["anthropic-ratelimit-requests-limit"] == "600"


def test_requests_over_the_limit_get_429_with_retry_after_and_the_limit():
    async def go():
        app = make_app(_echo, mean_latency_s=0.05, sigma=0.3, rpm=120, seed=1)  # 2 a second, a burst of 2
        from aiohttp.test_utils import TestServer

        async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as session:
            async def post(i, path="/v1/chat/completions"):
                async with session.post(server.make_url(path), json=_body(i)) as resp:
                    return resp.status, dict(resp.headers), await resp.json()

            replies = await asyncio.gather(*[post(i) for i in range(5)])
            anthropic = await post(9, "/v1/messages")
            async with session.get(server.make_url("/stats")) as resp:
                stats = await resp.json()
        return replies, anthropic, stats

    replies, anthropic, stats = asyncio.run(go())
    ok = [r for r in replies if r[0] == 200]
    refused = [r for r in replies if r[0] == 429]
    assert len(ok) == 2 and len(refused) == 3
    assert ok[0][2]["choices"][0]["message"]["content"].startswith('{"echo": "call ')
    assert all(int(h["Retry-After"]) >= 1 and h["x-ratelimit-limit-requests"] == "120" for _, h, _ in refused)
    assert refused[0][2]["error"]["type"] == "rate_limit"
    assert anthropic[0] == 429 and anthropic[1]["anthropic-ratelimit-requests-limit"] == "120"
    assert anthropic[2]["type"] == "error" and anthropic[2]["error"]["type"] == "rate_limit_error"
    assert stats["requests"] == 6 and stats["rate_limited"] == 4 and stats["answered"] == 2
    assert len(stats["latencies"]) == 2 and min(stats["latencies"]) > 0 and stats["max_in_flight"] == 2
