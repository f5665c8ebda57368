"""Provider adapters: build a request for one SDK, send it, normalize the reply.

A normalized reply is a plain JSON-able dict (what the cache stores)::

    {"text": str, "tool_calls": [{"id", "name", "arguments": str}], "finish_reason": str,
     "input_tokens": int, "output_tokens": int, "refusal": str}

``finish_reason`` uses the OpenAI vocabulary for every provider (stop, length,
tool_calls, content_filter), so roles read one vocabulary. Every provider is
reached through ``evosyn.agents.llm.transport`` (one aiohttp stack, no SDK on the
request path; its module doc says why); retrying is the client's job (its own
loop), so that backoff, retry-after and the retry bound are the same for every
provider.
"""
from __future__ import annotations

import copy
import functools
import json
import os
import re
from typing import Any

from pydantic import BaseModel

from evosyn.agents.llm.replies import preview
from evosyn.agents.llm.types import ClosedSchema, LLMOutputError

_NAME = re.compile(r"[^A-Za-z0-9_-]")


@functools.lru_cache(maxsize=256)
def schema_name(schema: type[BaseModel]) -> str:
    return _NAME.sub("_", schema.__name__)[:64] or "output"


@functools.lru_cache(maxsize=256)
def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema, built once per class (it costs milliseconds); callers must not mutate it."""
    return schema.model_json_schema()


@functools.lru_cache(maxsize=256)
def strict_json_schema(schema: type[BaseModel]) -> tuple[dict[str, Any], bool]:
    """The schema for OpenAI structured outputs, and whether strict mode can enforce it.

    Strict mode needs every object closed (no ``dict[str, X]`` fields); a schema
    with open objects is still sent, without strict, and validated on our side.
    A ``ClosedSchema`` is sent as it is, strict only where it meets strict mode's
    rules already (every object closed and every property required).
    Cached per class (building a JSON schema costs milliseconds); callers must not mutate it.
    """
    import openai

    plain = json_schema(schema)
    if issubclass(schema, ClosedSchema):
        return plain, not _has_open_object(plain) and _all_required(plain)
    if _has_open_object(plain):
        return plain, False
    try:  # the SDK's public helper makes the strict schema (its tool's parameters are that schema)
        return openai.pydantic_function_tool(schema)["function"]["parameters"], True
    except Exception:  # a construct the SDK cannot make strict: validate on our side instead
        return plain, False


@functools.lru_cache(maxsize=256)
def bounded_schema(schema: type[BaseModel], max_string: int | None, max_items: int | None) -> dict[str, Any]:
    """The schema sent to a constraining server, with a ``maxLength`` on every free string and a ``maxItems``
    on every array that has none: a grammar-constrained small model otherwise may fill a string or a list
    until ``max_tokens`` (a JSON that never closes). Whatever fits it fits the schema too (it only narrows)."""
    body, _ = strict_json_schema(schema)
    if max_string is None and max_items is None:
        return body
    return _bound(copy.deepcopy(body), max_string, max_items)


_SHAPES = {"type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "properties"}


def _flat(max_string: int | None, max_items: int | None) -> dict[str, Any]:
    """Any JSON value, bounded: a short string, a number, a boolean, null, or a short list of those (what an
    ``Any`` value becomes; left open, a grammar lets a small model nest or write without end)."""
    scalars = [{"type": "string", **({"maxLength": max_string} if max_string else {})}, {"type": "number"},
               {"type": "boolean"}, {"type": "null"}]
    return {"anyOf": [*scalars, {"type": "array", "items": {"anyOf": scalars},
                                 **({"maxItems": max_items} if max_items else {})}]}


def _bound(node: Any, max_string: int | None, max_items: int | None) -> Any:
    if isinstance(node, dict):
        if node.get("additionalProperties") is True:  # dict[str, Any]: its values bounded too
            node["additionalProperties"] = _flat(max_string, max_items)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict) and not (_SHAPES & set(node[key])):  # an Any
                node[key] = _flat(max_string, max_items)
        kind = node.get("type")
        if kind == "string" and max_string is not None and not ({"enum", "const", "format", "pattern"} & set(node)):
            node["maxLength"] = min(node.get("maxLength", max_string), max_string)
        if kind == "array" and max_items is not None:
            node["maxItems"] = min(node.get("maxItems", max_items), max_items)
        for value in node.values():
            _bound(value, max_string, max_items)
    elif isinstance(node, list):
        for value in node:
            _bound(value, max_string, max_items)
    return node


def _has_open_object(node: Any) -> bool:
    if isinstance(node, dict):
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) or extra is True:
            return True
        return any(_has_open_object(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_open_object(v) for v in node)
    return False


def _all_required(node: Any) -> bool:
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and set(node.get("required", [])) != set(props):
            return False
        return all(_all_required(v) for v in node.values())
    if isinstance(node, list):
        return all(_all_required(v) for v in node)
    return True


def _json_object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):  # the transport hands back the text of a reply that is not JSON
        raise LLMOutputError("the server's reply is not a JSON object", raw=preview(data))
    return data


# ---------------------------------------------------------------- OpenAI and OpenAI-compatible
STRUCTURED_OUTPUT = ("response_format", "structured_outputs", "guided_json", "none")


class OpenAIProvider:
    """OpenAI's chat completions, and every server that speaks them (vLLM, llama.cpp's server, ...).

    ``structured_output`` says how a schema reaches the server (``RoleConfig.structured_output``):
    ``response_format`` is OpenAI's structured outputs, which llama.cpp's server compiles into a
    grammar and vLLM into guided decoding, so even a small local model can only write schema-valid
    JSON; ``structured_outputs`` and ``guided_json`` are vLLM's own fields for the same (current, and
    before 0.12); ``none`` sends no schema (a server that refuses all three). Whatever is sent, the
    reply is validated against the schema on our side.
    """

    def __init__(self, name: str, base_url: str | None, api_key: str, timeout: float,
                 max_reply_bytes: int | None = None, structured_output: str = "response_format",
                 bounds: tuple[int | None, int | None] = (None, None)):
        from evosyn.agents.llm.transport import (DEFAULT_MAX_REPLY_BYTES, DEFAULT_OPENAI_URL, ERRORS, ChatTransport,
                                          openai_headers)

        if structured_output not in STRUCTURED_OUTPUT:
            raise ValueError(f"structured_output: {structured_output!r} is not one of {', '.join(STRUCTURED_OUTPUT)}")
        self.name, self.structured_output = name, structured_output
        self.bounds = bounds  # (max string length, max array items) added to the schema sent: bounded_schema
        self.errors = ERRORS
        # the SDK's default URL and its environment override, so a role without base_url goes where the SDK went
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL
        self.transport = ChatTransport(url, openai_headers(api_key), timeout,
                                       max_reply_bytes or DEFAULT_MAX_REPLY_BYTES)

    def build(self, model: str, messages: list[dict], schema: type[BaseModel] | None, tools: list[dict] | None,
              temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens is not None:
            # OpenAI's current name; vLLM and llamafactory-cli api know the older one
            kwargs["max_completion_tokens" if self.name == "openai" else "max_tokens"] = max_tokens
        if tools:  # one call per turn: the SFT formats and the learners expect single calls
            kwargs["tools"] = tools
            kwargs["parallel_tool_calls"] = False
        if schema is not None and self.structured_output != "none":
            # the strict form (every field required, objects closed) where it exists: a constrained
            # decoder then writes every field, and nothing the model invents beside them
            body, strict = strict_json_schema(schema)
            if self.bounds != (None, None):
                body = bounded_schema(schema, *self.bounds)
            if self.structured_output == "response_format":
                kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": schema_name(schema), "schema": body, "strict": strict}}
            elif self.structured_output == "structured_outputs":
                kwargs["structured_outputs"] = {"json": body}
            else:
                kwargs["guided_json"] = body
        return kwargs

    async def send(self, kwargs: dict[str, Any]) -> Any:
        # the body as built, the reply as plain JSON: `create` would walk every parameter through
        # the SDK's type-driven transform and build a typed model of the whole reply, for five fields read
        return await self.transport.post("/chat/completions", kwargs)

    @staticmethod
    def parse(data: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A chat-completions body -> the normalized reply (before ``replies.normalize_reply`` checks it)."""
        data = _json_object(data)
        choices = data.get("choices") or []
        usage = data.get("usage") or {}
        if not choices:
            return {"text": "", "tool_calls": [], "finish_reason": "empty", "refusal": "",
                    "input_tokens": usage.get("prompt_tokens") or 0, "output_tokens": 0}
        msg = choices[0].get("message") or {}
        calls = [{"id": c.get("id") or f"call_{i}", "name": c["function"].get("name", ""),
                  "arguments": c["function"].get("arguments") or "{}"}
                 for i, c in enumerate(msg.get("tool_calls") or []) if isinstance(c.get("function"), dict)]
        return {"text": msg.get("content") or "", "tool_calls": calls,
                "finish_reason": choices[0].get("finish_reason") or "", "refusal": msg.get("refusal") or "",
                "input_tokens": usage.get("prompt_tokens") or 0, "output_tokens": usage.get("completion_tokens") or 0}


# ---------------------------------------------------------------- Anthropic
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
         "refusal": "content_filter", "pause_turn": "stop"}


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def to_anthropic_messages(messages: list[dict]) -> tuple[str, list[dict]]:
    """OpenAI-style chat messages -> (system prompt, Anthropic messages with content blocks)."""
    system: list[str] = []
    out: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:  # Anthropic wants turns to alternate: merge neighbours
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role, text = m.get("role"), _text_of(m.get("content"))
        if role == "system":
            system.append(text)
        elif role == "user":
            add("user", [{"type": "text", "text": text}] if text else [])
        elif role == "assistant":
            blocks = [{"type": "text", "text": text}] if text else []
            for c in m.get("tool_calls") or []:
                fn = c.get("function", c)
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args or "{}")
                    except json.JSONDecodeError:
                        args = {"_unparsed": args}
                blocks.append({"type": "tool_use", "id": c.get("id", ""), "name": fn.get("name", ""), "input": args})
            add("assistant", blocks)
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""), "content": text}])
        else:
            raise ValueError(f"message role {role!r} is not one of system, user, assistant, tool")
    return "\n\n".join(s for s in system if s), out


def to_anthropic_tools(tools: list[dict]) -> list[dict]:
    out = []
    for t in tools:
        if "input_schema" in t:  # already in Anthropic's shape
            out.append(t)
            continue
        fn = t.get("function", t)
        tool = {"name": fn["name"], "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
        if fn.get("description"):
            tool["description"] = fn["description"]
        out.append(tool)
    return out


@functools.cache
def _accepts_temperature() -> bool:
    """Recent Anthropic SDKs dropped ``temperature`` from ``messages.create`` (newer models fix it): omit it there."""
    import inspect

    from anthropic.resources.messages import AsyncMessages

    return "temperature" in inspect.signature(AsyncMessages.create).parameters


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, base_url: str | None, api_key: str, timeout: float, max_reply_bytes: int | None = None):
        from evosyn.agents.llm.transport import (DEFAULT_ANTHROPIC_URL, DEFAULT_MAX_REPLY_BYTES, ERRORS, ChatTransport,
                                          anthropic_headers)

        self.errors = ERRORS
        # the messages endpoint on the same transport as every other provider (one HTTP stack);
        # the base URL as the SDK takes it: without /v1, which the endpoint's path carries
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
        self.transport = ChatTransport(url, anthropic_headers(api_key), timeout,
                                       max_reply_bytes or DEFAULT_MAX_REPLY_BYTES)

    def build(self, model: str, messages: list[dict], schema: type[BaseModel] | None, tools: list[dict] | None,
              temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
        system, converted = to_anthropic_messages(messages)
        kwargs: dict[str, Any] = {"model": model, "messages": converted, "max_tokens": max_tokens or 4096}
        if system:
            kwargs["system"] = system
        if temperature is not None and _accepts_temperature():
            kwargs["temperature"] = temperature
        all_tools = to_anthropic_tools(tools or [])
        if schema is not None:
            # JSON through a forced tool: the reply is the tool's input, already parsed by the API
            name = schema_name(schema)
            all_tools.append({"name": name, "description": f"Return the answer as a {name} object.",
                              "input_schema": json_schema(schema)})
            # with other tools on offer the model may call them instead; alone, the answer tool is forced
            kwargs["tool_choice"] = ({"type": "tool", "name": name} if not tools
                                     else {"type": "any", "disable_parallel_tool_use": True})
        if all_tools:
            kwargs["tools"] = all_tools
        return kwargs

    async def send(self, kwargs: dict[str, Any]) -> Any:
        return await self.transport.post("/v1/messages", kwargs)

    @staticmethod
    def parse(data: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A messages body -> the normalized reply; the forced answer tool's input becomes the text."""
        data = _json_object(data)
        texts, calls = [], []
        for block in data.get("content") or []:
            if block.get("type") == "text":
                texts.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                calls.append({"id": block.get("id", ""), "name": block.get("name", ""),
                              "arguments": json.dumps(block.get("input") or {})})
        answer = kwargs.get("tool_choice", {}).get("name")
        structured = next((c for c in calls if c["name"] == answer), None) if answer else None
        if answer is None and kwargs.get("tool_choice"):  # schema + tools: the last offered tool is the answer
            last = kwargs["tools"][-1]["name"]
            structured = next((c for c in calls if c["name"] == last), None)
        stop = data.get("stop_reason") or ""
        finish = _STOP.get(stop, stop)
        if structured is not None:
            calls.remove(structured)
            if finish == "tool_calls" and not calls:  # answering through the answer tool is a normal stop
                finish = "stop"
        usage = data.get("usage") or {}
        return {"text": structured["arguments"] if structured else "".join(texts), "tool_calls": calls,
                "finish_reason": finish, "structured": structured is not None, "refusal": "",
                "input_tokens": usage.get("input_tokens") or 0, "output_tokens": usage.get("output_tokens") or 0}
