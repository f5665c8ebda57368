"""The LLM client: one async chat interface over OpenAI, Anthropic and OpenAI-compatible servers.

Structured output is a pydantic schema in, a validated instance out (OpenAI:
``response_format`` json_schema; Anthropic: a forced tool). Every call is
rate-limited per model, retried on transient errors, cached on disk by content,
and logged as an ``LLMCall`` row.
"""
from evosyn.agents.llm.calllog import BoundClient, CallLog
from evosyn.agents.llm.client import LLMClient, LLMRequestError
from evosyn.agents.llm.factory import check_role_config, make_client
from evosyn.agents.llm.types import ChatResult, LLMOutputError, LLMUnavailable, ToolCallOut, Usage

__all__ = ["BoundClient", "CallLog", "ChatResult", "LLMClient", "LLMOutputError", "LLMRequestError", "LLMUnavailable", "ToolCallOut", "Usage",
           "check_role_config", "make_client"]
