"""The LLM client's limits (agents/llm/limits.py): one concurrency bound per model shared by every client and thread,
the per-minute bucket, slots given back by cancelled waiters and across event loops; against scripted servers."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from evosyn.agents.llm import LLMOutputError
from evosyn.agents.llm.limits import PerMinute, Slots
from tests.agents.test_llm_client import FAULTS, GOOD, KEY, MSGS, Plan, client, good
from tests.fakes.openai_server import FakeLLMServer, Script


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("EVOSYN_TEST_LLM_KEY", KEY)


def test_concurrency_bound_is_shared_per_model_across_clients_and_threads():
    with FakeLLMServer(good, latency_s=0.05) as server:
        a, b = client(server, "openai", max_concurrency=3), client(server, "openai", max_concurrency=3)

        async def burst():
            return await asyncio.gather(*[(a if i % 2 else b).chat(MSGS + [{"role": "user", "content": str(i)}],
                                                                    schema=Plan) for i in range(24)])
        results = asyncio.run(burst())
        threads = [threading.Thread(target=a.chat_sync, args=(MSGS + [{"role": "user", "content": f"t{i}"}],),
                                    kwargs={"schema": Plan}) for i in range(6)]
        for t in threads:
            t.start()
        results += [b.chat_sync(MSGS, schema=Plan) for _ in range(2)]
        for t in threads:
            t.join()
        assert server.count == 32
        assert 2 <= server.max_in_flight <= 3
    assert all(r.parsed == Plan(**GOOD) for r in results) and a.limits is b.limits


def test_per_minute_bucket_waits_for_refill():
    async def go():
        bucket = PerMinute(6000)  # 100 units a second
        await bucket.take(6000)  # a full burst is immediate
        t0 = time.perf_counter()
        await bucket.take(20)  # then 20 units take ~0.2 s to come back
        return time.perf_counter() - t0
    assert 0.15 <= asyncio.run(go()) < 1.0


def test_cancelled_waiter_gives_its_slot_back():
    async def go():
        slots = Slots(1)
        await slots.acquire()
        waiter = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0.01)
        waiter.cancel()
        slots.release()
        await asyncio.wait_for(slots.acquire(), 1)  # would hang if the slot leaked
        return slots.used
    assert asyncio.run(go()) == 1


def test_a_call_from_another_loop_returns_raises_and_cancels_across_the_hop():
    """An async caller on its own loop: its result and errors come back, and cancelling its await cancels the
    request on the client's loop (the slot comes back: the next call does not wait for it)."""
    with FakeLLMServer(Script(good, FAULTS["malformed"], default=good), latency_s=1.0) as server:
        c = client(server, "openai", max_concurrency=1, max_retries=0)

        async def go():
            ok = await c.chat(MSGS, schema=Plan)
            with pytest.raises(LLMOutputError):
                await c.chat(MSGS + [{"role": "user", "content": "again"}], schema=Plan)
            slow = asyncio.ensure_future(c.chat(MSGS + [{"role": "user", "content": "slow"}], schema=Plan))
            await asyncio.sleep(0.2)
            slow.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow
            t0 = time.perf_counter()
            after = await asyncio.wait_for(c.chat(MSGS + [{"role": "user", "content": "next"}], schema=Plan), 5)
            return ok, after, time.perf_counter() - t0

        ok, after, waited = asyncio.run(go())
    assert ok.parsed == Plan(**GOOD) and after.parsed == Plan(**GOOD)
    assert waited < 1.6  # one request's latency (1 s), not two: the cancelled one gave its slot back at once
