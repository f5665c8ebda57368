"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (real HTTP, for real SDK clients).

``ScriptedServer(respond)`` keeps its original API (``respond(body) -> completion dict``);
``FakeLLMServer`` (re-exported from ``evosyn.benchmarks.fake_llm_server``) adds per-request
scripts (429 with retry-after, 500, malformed, truncated, slow), a fixed latency,
in-flight counting, and the Anthropic messages endpoint.
"""
from __future__ import annotations

from typing import Any, Callable

from evosyn.benchmarks.fake_llm_server import (FakeLLMServer, Reply, Request, Script, answer, error,  # noqa: F401
                                        openai_reply)

Responder = Callable[[dict[str, Any]], dict[str, Any]]


def completion(content: str | None = None, tool_call: dict[str, Any] | None = None, model: str = "scripted") -> dict:
    return openai_reply(content, tool_call, model=model)


class ScriptedServer(FakeLLMServer):
    def __init__(self, respond: Responder, latency_s: float = 0.0):
        super().__init__(lambda request: respond(request.body), latency_s)
