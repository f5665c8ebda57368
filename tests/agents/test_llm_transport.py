"""The chat transport: the environment's proxy is honoured (looked up once), NO_PROXY bypasses it; against a hostile
server on 127.0.0.1 (benchmarks/hostile_server.py) what it reads is bounded in size and time."""
from __future__ import annotations

import json
import time

import pytest

from evosyn.agents.llm import LLMOutputError, LLMUnavailable, make_client
from evosyn.agents.llm.transport import env_proxy
from evosyn.config import RoleConfig
from evosyn.benchmarks.hostile_server import HostileServer
from tests.fakes.openai_server import FakeLLMServer, answer


def test_env_proxy_follows_the_environment(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert env_proxy("https://api.openai.com/v1") == "http://proxy.example:3128"
    assert env_proxy("http://api.openai.com/v1") is None  # no HTTP_PROXY set
    assert env_proxy("https://127.0.0.1:8000/v1") is None  # bypassed


def test_requests_go_through_the_proxy(monkeypatch):
    """A server standing in for the proxy: a client of an unreachable host still gets its answer through it."""
    for var in ("NO_PROXY", "no_proxy", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("EVOSYN_TEST_KEY", "sk-test")
    with FakeLLMServer(lambda r: answer(r, {"ok": True})) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
        cfg = RoleConfig(backend="llm", provider="openai_compatible", model="m", base_url="http://llm.invalid/v1",
                         api_key_env="EVOSYN_TEST_KEY")
        client = make_client("planner", cfg, cache=False)
        result = client.chat_sync([{"role": "user", "content": "hi"}])
        client.close()
        assert proxy.count == 1 and proxy.requests[0]["path"] == "http://llm.invalid/v1/chat/completions"
    assert json.loads(result.text) == {"ok": True}


# ---------------------------------------------------------------- a hostile server
def _client(base_url, **kw):
    cfg = RoleConfig(backend="llm", provider="openai_compatible", model="m", base_url=base_url,
                     api_key_env="EVOSYN_TEST_KEY", max_retries=0, **kw)
    return make_client("planner", cfg, cache=False)


def _ask(client):
    try:
        return client.chat_sync([{"role": "user", "content": "hi"}]), None
    except Exception as exc:  # noqa: BLE001 - the test reads which error and its one line
        return None, exc
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["huge-length", "endless-chunked", "big-reply"])
def test_a_reply_over_the_bound_is_refused_while_it_is_read(monkeypatch, mode):
    """Refused at the announced length or once the body passes the bound: the server never gets to push much more
    than the bound (plus what the sockets buffer), and the error is one line."""
    monkeypatch.setenv("EVOSYN_TEST_KEY", "sk-test-hostile-0000")
    with HostileServer(mode) as server:
        t0 = time.monotonic()
        result, exc = _ask(_client(server.base_url, max_reply_bytes=1 << 20, timeout_s=60))
        took = time.monotonic() - t0
        time.sleep(0.2)
        sent = server.sent
    assert result is None and isinstance(exc, LLMOutputError)
    assert "max_reply_bytes" in str(exc) and "\n" not in str(exc)
    assert took < 30  # at the bound, not at the timeout
    assert sent < 24 * (1 << 20)  # it stopped reading: 50 MB, 10 GB or forever were offered


def test_a_stalled_server_ends_at_the_timeout_in_one_line(monkeypatch):
    monkeypatch.setenv("EVOSYN_TEST_KEY", "sk-test-hostile-0000")
    with HostileServer("stalled-headers") as server:
        t0 = time.monotonic()
        result, exc = _ask(_client(server.base_url, timeout_s=1.5))
        took = time.monotonic() - t0
    assert result is None and isinstance(exc, LLMUnavailable)
    assert "timed out" in str(exc) and "\n" not in str(exc)
    assert 1.0 < took < 15


def test_an_endless_body_under_the_bound_ends_at_the_timeout(monkeypatch):
    """A body that trickles forever below the size bound: the request's total timeout ends it."""
    monkeypatch.setenv("EVOSYN_TEST_KEY", "sk-test-hostile-0000")
    # a trickle: at full loopback speed a quiet machine pushes past even the largest bound (1 GiB) within the second
    with HostileServer("endless-chunked", pause_s=0.01) as server:
        t0 = time.monotonic()
        result, exc = _ask(_client(server.base_url, timeout_s=1.0, max_reply_bytes=1 << 30))
        took = time.monotonic() - t0
    assert result is None and isinstance(exc, LLMUnavailable) and "timed out" in str(exc)
    assert took < 15


def test_deep_nesting_is_an_unusable_reply_not_a_crash(monkeypatch):
    monkeypatch.setenv("EVOSYN_TEST_KEY", "sk-test-hostile-0000")
    with HostileServer("deep-nesting") as server:
        result, exc = _ask(_client(server.base_url))
    assert result is None and isinstance(exc, LLMOutputError) and "\n" not in str(exc)


def test_a_reply_that_echoes_the_key_is_masked_before_it_is_cached_or_read(monkeypatch, tmp_path):
    key = "sk-test-echoed-key-0123456789"
    monkeypatch.setenv("EVOSYN_TEST_KEY", key)
    with HostileServer("echo-key") as server:
        cfg = RoleConfig(backend="llm", provider="openai_compatible", model="m", base_url=server.base_url,
                         api_key_env="EVOSYN_TEST_KEY", max_retries=0)
        client = make_client("planner", cfg, cache_dir=tmp_path / "llm_cache")
        result = client.chat_sync([{"role": "user", "content": "hi"}])
        client.close()
    assert key not in result.text and "Bearer ***" in result.text
    cached = [p for p in (tmp_path / "llm_cache").rglob("*") if p.is_file()]
    assert cached and not any(key.encode() in p.read_bytes() for p in cached)
