"""The chat transport: the environment's proxy is honoured (looked up once), NO_PROXY bypasses it."""
from __future__ import annotations

import json

from agents.llm import make_client
from agents.llm.transport import env_proxy
from storage.config import RoleConfig
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
