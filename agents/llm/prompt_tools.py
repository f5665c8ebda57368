"""Prompt-based tool calls, for models whose chat template has no tool calling (SmolLM2, many small GGUFs).

Opt-in per role (``tool_calls: prompt`` in its LLM config). The tools are not
sent as the request's ``tools``: they are described in the system prompt, and
the model answers a tool call as one JSON object in its reply text::

    {"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}

or inside a ```json fence or ``<tool_call>...</tool_call>`` tags anywhere in the
reply (the prose around them is dropped). Any other reply is a message to the
user. The last user turn ends with a one-line reminder of that format (small
models forget a format stated thousands of tokens earlier). A reply that starts as a call is parsed
and validated as strictly as a native one, and more: strict JSON
(``replies.strict_loads``), exactly the keys ``name`` and ``arguments``, a tool
that was offered, arguments valid against that tool's JSON schema
(``jsonschema``). Anything else is an ``LLMOutputError``: the client records the
reply as ``invalid`` and the role re-asks within its bound, as for every other
unusable reply.

Earlier tool calls and results in the conversation are written back as text
(the call's JSON, then ``Tool result (name): ...`` as a user turn), since such
templates know no ``tool`` role either.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from evosyn.agents.llm.replies import strict_loads, unfence
from evosyn.agents.llm.types import LLMOutputError, ToolCallOut

MODES = ("native", "prompt")
REMINDER = ('(To call a tool, reply with only a JSON object such as {example}; '
            "to talk to the user, reply in plain text.)")
_FENCE = "```json"
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _fn(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def _type_of(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type_of(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list[{_type_of(schema.get('items') or {})}]"
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    return str(schema.get("type", "any"))


def signature(tool: dict[str, Any]) -> str:
    """``name(arg: type, opt?: type) - description``: a compact line per tool (the JSON schema is 4x longer)."""
    fn = _fn(tool)
    params = fn.get("parameters") or {}
    required = set(params.get("required") or [])
    args = ", ".join(f"{k}{'' if k in required else '?'}: {_type_of(v)}"
                     for k, v in (params.get("properties") or {}).items())
    text = f"{fn['name']}({args})"
    if fn.get("description"):
        text += " - " + " ".join(str(fn["description"]).split())[:300]
    defs = params.get("$defs") or {}
    for name, d in defs.items():
        fields = ", ".join(f"{k}: {_type_of(v)}" for k, v in (d.get("properties") or {}).items())
        text += f"\n    {name} = {{{fields}}}"
    return text


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    lines = "\n".join(f"- {signature(t)}" for t in tools)
    return ("# Tools\nYou can call these tools (a ? marks an optional argument):\n"
            f"{lines}\n\nTo call a tool, reply with only a JSON object and nothing else, e.g. "
            '{"name": "<tool name>", "arguments": {"<argument>": "<value>"}}. '
            "One call per reply; its result comes back in the next message. "
            "To talk to the user instead, reply in plain text.")


def _call_text(call: dict[str, Any]) -> str:
    fn = call.get("function", call)
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args or "{}")
        except json.JSONDecodeError:
            pass
    return json.dumps({"name": fn.get("name", ""), "arguments": args})


def prompt_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style messages with tools -> plain system / user / assistant text messages for a tool-less template."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool_call_id -> tool name, for the results
    described = False
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if not isinstance(content, str):  # content parts: their text
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "system" and not described:
            out.append({"role": "system", "content": f"{content}\n\n{tools_prompt(tools)}".strip()})
            described = True
        elif role == "assistant" and m.get("tool_calls"):
            for c in m["tool_calls"]:
                names[c.get("id", "")] = c.get("function", c).get("name", "")
            calls = "\n".join(_call_text(c) for c in m["tool_calls"])
            out.append({"role": "assistant", "content": f"{content}\n{calls}".strip()})
        elif role == "tool":
            name = names.get(m.get("tool_call_id", ""), "tool")
            out.append({"role": "user", "content": f"Tool result ({name}): {content}"})
        else:
            out.append({"role": role, "content": content})
    if not described:
        out.insert(0, {"role": "system", "content": tools_prompt(tools)})
    if out[-1]["role"] == "user":  # small models forget a format stated thousands of tokens earlier
        out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n\n{reminder(tools)}"}
    return out


def reminder(tools: list[dict[str, Any]]) -> str:
    """The format once more, with a real tool as the example (the one with the fewest required arguments)."""
    def required(t):
        return (_fn(t).get("parameters") or {}).get("required") or []

    tool = min(tools, key=lambda t: (len(required(t)), _fn(t)["name"]))
    example = json.dumps({"name": _fn(tool)["name"], "arguments": {k: "..." for k in required(tool)}})
    return REMINDER.format(example=example)


def _call_body(text: str) -> str | None:
    """The JSON text of the call a reply makes, or None when the reply is a message."""
    body = text.strip()
    if _OPEN in body:
        body = body.split(_OPEN, 1)[1]
        body = body.split(_CLOSE, 1)[0] if _CLOSE in body else body
        return body.strip()
    if _FENCE in body:  # "Here is the call: ```json {...} ```": the fenced block is the call, the prose dropped
        body = body.split(_FENCE, 1)[1]
        return (body.split("```", 1)[0] if "```" in body else body).strip()
    body = unfence(body).strip()
    if body.startswith("```"):  # a fence without the json tag: ``` {...} ```
        body = body.strip("`").strip()
    return body if body.startswith("{") else None


def _schema_errors(schema: dict[str, Any], args: dict[str, Any]) -> str:
    import jsonschema  # the validator of record for JSON schema (already a dependency of mlflow and litellm)

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    return "; ".join(f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message[:160]}"
                     for e in errors[:3])


def parse_tool_reply(text: str, tools: list[dict[str, Any]]) -> tuple[str, list[ToolCallOut]]:
    """(text, calls) of a reply in prompt mode: ``("", [call])`` for a valid call, ``(text, [])`` for a message.

    ``LLMOutputError`` (one line, the raw reply kept) when the reply is a call that is not valid JSON, not of the
    shape ``{"name", "arguments"}``, names a tool not offered, or has arguments its schema rejects.
    """
    body = _call_body(text)
    if body is None:
        return text, []
    data = strict_loads(body, what="tool call JSON")
    if not isinstance(data, dict) or set(data) - {"name", "arguments"} or not isinstance(data.get("name"), str):
        got = sorted(data)[:6] if isinstance(data, dict) else type(data).__name__
        raise LLMOutputError(f'a tool call must be {{"name": "<tool>", "arguments": {{...}}}} (got {got})', raw=text)
    name, args = data["name"], data.get("arguments", {})
    offered = {_fn(t)["name"]: t for t in tools}
    if name not in offered:
        raise LLMOutputError(f"tool call names an unknown tool {name[:80]!r} (offered: "
                             f"{', '.join(sorted(offered))[:300]})", raw=text)
    if not isinstance(args, dict):
        raise LLMOutputError(f"tool call {name}: arguments must be a JSON object, got {type(args).__name__}", raw=text)
    try:
        problems = _schema_errors(_fn(offered[name]).get("parameters") or {"type": "object"}, args)
    except Exception as exc:  # a schema jsonschema cannot use (or arguments too odd for it): a rejection, no crash
        raise LLMOutputError(f"tool call {name}: arguments could not be checked ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:160]})", raw=text) from None
    if problems:
        raise LLMOutputError(f"tool call {name}: invalid arguments: {problems}", raw=text)
    call_id = "call_" + hashlib.sha256(body.encode()).hexdigest()[:12]  # deterministic: same reply, same id
    return "", [ToolCallOut(id=call_id, name=name, arguments=args)]
