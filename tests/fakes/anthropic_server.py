"""A scripted Anthropic-messages-compatible server (``POST /v1/messages``) on 127.0.0.1.

The same threaded server as the OpenAI one (it answers both protocols); pass
``server.anthropic_base_url`` to the Anthropic SDK, which appends ``/v1/messages``.
"""
from __future__ import annotations

from evosyn.benchmarks.fake_llm_server import (FakeLLMServer, Reply, Request, Script, anthropic_reply, answer,  # noqa: F401
                                        error)

AnthropicServer = FakeLLMServer
