"""The event-loop scripted server answers like the threaded one: replies, statuses, headers, latency, /stats."""
from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from benchmarks.fake_llm_server import answer, error
from benchmarks.fast_llm_server import serve


def _respond(request):
    if request.body.get("fail"):
        return error(429, "slow down", retry_after=2)
    return answer(request, {"echo": request.body["messages"][-1]["content"]})


@pytest.fixture
def port():
    ready, box = threading.Event(), {}
    loop = asyncio.new_event_loop()

    def run():
        asyncio.set_event_loop(loop)
        task = loop.create_task(serve(_respond, 0.05, ready=lambda p: (box.update(port=p), ready.set())))
        box["task"] = task
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield box["port"]
    loop.call_soon_threadsafe(box["task"].cancel)
    thread.join(10)


def _post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, json.loads(resp.read())


def test_a_reply_after_the_latency_and_the_stats(port):
    t0 = time.perf_counter()
    status, body = _post(port, {"messages": [{"role": "user", "content": "hello"}]})
    assert time.perf_counter() - t0 >= 0.05
    assert status == 200 and json.loads(body["choices"][0]["message"]["content"]) == {"echo": "hello"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as resp:
        assert json.loads(resp.read()) == {"requests": 1, "max_in_flight": 1, "in_flight": 0}


def test_an_error_status_keeps_its_headers(port):
    with pytest.raises(urllib.error.HTTPError) as exc:
        _post(port, {"fail": True, "messages": []})
    assert exc.value.code == 429 and exc.value.headers["retry-after"] == "2"


def test_replies_are_in_flight_together(port):
    """Requests sent together wait out their latency together, not one after the other: the server's own count
    of requests in flight says so (a wall-clock bound failed on a loaded machine, with the server right)."""
    from concurrent.futures import ThreadPoolExecutor

    start = threading.Barrier(8)

    def send(i):
        start.wait(10)
        return _post(port, {"messages": [{"role": "user", "content": str(i)}]})

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(send, range(8)))
    assert [json.loads(b["choices"][0]["message"]["content"])["echo"] for _, b in replies] == [str(i) for i in range(8)]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as resp:
        stats = json.loads(resp.read())
    assert stats["requests"] == 8 and stats["in_flight"] == 0 and stats["max_in_flight"] >= 2, stats
