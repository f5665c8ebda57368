"""Reading a model's reply: the normalized reply's shape, strict JSON, and interpretation.

Everything a server or a model sends is hostile until checked. A reply may be
nested thousands of levels deep, megabytes long, carry NaN / Infinity (which
``json.loads`` accepts by default), numbers with thousands of digits (a
``ValueError`` of ``int``), duplicate keys (silently last-wins), escaped lone
surrogates (which no Parquet file can hold), be truncated, or have the wrong
types anywhere. Each of these is an ``LLMOutputError`` here, with a one-line
reason, and nothing else ever escapes: the client records the rejection and the
role re-asks.
"""
from __future__ import annotations

import json
import math
import re
import reprlib
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from evosyn.agents.llm.types import LLMOutputError, ToolCallOut

MAX_REPLY_CHARS = 1_000_000  # far above any max_tokens in use; bounds the cache and every parse
MAX_DEPTH = 64  # the deepest legitimate schema or tool argument is under 10 levels
MAX_NUMBER_CHARS = 64  # digits of one JSON number: an int of 10**63 is already no id, count or amount
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*+"', re.DOTALL)  # possessive: no backtracking on a long string
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def one_line(text: Any, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (error messages and call rows)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_PREVIEW = reprlib.Repr()
_PREVIEW.maxlevel, _PREVIEW.maxstring, _PREVIEW.maxother = 6, 400, 200


def preview(value: Any) -> str:
    """A bounded, storable picture of any value (``str`` of a structure 10,000 levels deep raises)."""
    return storable(value[:2000] if isinstance(value, str) else _PREVIEW.repr(value))


def storable(text: str) -> str:
    """``text`` with lone surrogates replaced, so it can be encoded as UTF-8 (Parquet, HTTP, the cache)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


# ---------------------------------------------------------------- strict JSON
def json_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text (strings skipped), without parsing it."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # strings included: the openings can only be fewer
        return MAX_DEPTH
    brackets = _NOT_BRACKET.sub("", _STRINGS.sub("", text))
    if brackets.count("[") + brackets.count("{") <= MAX_DEPTH:  # cannot be deeper than its openings
        return MAX_DEPTH
    depth = 0
    for c in brackets:  # linear in a text already bounded by MAX_REPLY_CHARS, and stops at the bound
        depth += 1 if c in "[{" else -1
        if depth > MAX_DEPTH:
            return depth
    return MAX_DEPTH


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON (write a number or null)")


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number with {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number with {len(text)} characters")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a float")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k[:80]!r}")
        out[k] = v
    return out


def strict_loads(text: str, what: str = "JSON") -> Any:
    """Parse JSON as the RFC defines it, bounded in size, depth and number length; else ``LLMOutputError``."""
    if not isinstance(text, str):
        raise LLMOutputError(f"{what}: expected text, got {type(text).__name__}", raw=str(text)[:2000])
    if len(text) > MAX_REPLY_CHARS:
        raise LLMOutputError(f"{what}: too large ({len(text):,} characters, at most {MAX_REPLY_CHARS:,})",
                             raw=text[:2000])
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise LLMOutputError(f"{what}: nested more than {MAX_DEPTH} levels deep", raw=text[:2000])
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_int=_int, parse_float=_float,
                          object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"malformed {what}: {exc.msg} at line {exc.lineno} column {exc.colno}",
                             raw=text) from None
    except (ValueError, RecursionError, OverflowError, TypeError) as exc:
        raise LLMOutputError(f"invalid {what}: {one_line(exc)}", raw=text) from None
    try:  # escaped lone surrogates ("\ud800") parse, but no UTF-8 file can hold them
        if "\\u" in text or not _encodable(text):  # else no string in ``data`` can hold one
            json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise LLMOutputError(f"invalid {what}: a string holds an unpaired surrogate (invalid unicode)",
                             raw=storable(text)) from None
    return data


# ---------------------------------------------------------------- the normalized reply
def _str(value: Any, limit: int = MAX_REPLY_CHARS + 1) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return storable(value[:limit])  # longer than the bound: kept just long enough to be rejected as such


def _count(value: Any) -> int:
    """A token count; a server's nonsense there costs the row its count, never the reply."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53 else 0


def normalize_reply(reply: Any) -> dict[str, Any]:
    """A provider's (or the cache's) reply as the one shape the client reads; ``LLMOutputError`` if it has none.

    The shape (see ``evosyn.agents.llm.providers``)::

        {"text": str, "tool_calls": [{"id": str, "name": str, "arguments": str}], "finish_reason": str,
         "refusal": str, "input_tokens": int, "output_tokens": int, "structured": bool}
    """
    try:
        if not isinstance(reply, dict):
            raise TypeError(f"expected an object, got {type(reply).__name__}")
        calls = reply.get("tool_calls") or []
        if not isinstance(calls, list):
            raise TypeError(f"tool_calls: expected a list, got {type(calls).__name__}")
        tool_calls = []
        for i, c in enumerate(calls[:64]):
            if not isinstance(c, dict):
                raise TypeError(f"tool call {i}: expected an object, got {type(c).__name__}")
            args = c.get("arguments")
            if not isinstance(args, str):  # some servers send the arguments already parsed
                args = json.dumps(args if args is not None else {}, default=str)
            tool_calls.append({"id": _str(c.get("id"), 200) or f"call_{i}", "name": _str(c.get("name"), 200),
                               "arguments": _str(args)})
        out = {"text": _str(reply.get("text")), "tool_calls": tool_calls,
               "finish_reason": _str(reply.get("finish_reason"), 64), "refusal": _str(reply.get("refusal"), 2000),
               "input_tokens": _count(reply.get("input_tokens")), "output_tokens": _count(reply.get("output_tokens"))}
        if "structured" in reply:
            out["structured"] = bool(reply["structured"])
        return out
    except (TypeError, ValueError, RecursionError, AttributeError) as exc:
        raise LLMOutputError(f"the server's reply is not a chat completion: {one_line(exc)}",
                             raw=preview(reply)) from None


def read_reply(parse: Callable[[Any, dict], dict], body: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A provider's ``parse`` of a response body, normalized: ``LLMOutputError`` whatever the body holds."""
    try:
        return normalize_reply(parse(body, kwargs))
    except LLMOutputError:
        raise
    except Exception as exc:  # a body of another shape (a list for a message, a number for a block, ...)
        raise LLMOutputError(f"the server's reply is not a chat completion ({type(exc).__name__}: {one_line(exc)})",
                             raw=preview(body)) from None


# ---------------------------------------------------------------- interpretation
def unfence(text: str) -> str:
    """The JSON inside a ```json ... ``` fence (some served models add one), else ``text``.

    String operations, not a regex: a lazy ``(.*?)`` between fences backtracks for seconds to minutes on
    a fence that never closes followed by thousands of blank lines.
    """
    body = text.strip()
    if not (body.startswith("```") and body.endswith("```") and len(body) >= 6):
        return text
    body = body[3:-3]
    if body.startswith("json"):
        body = body[4:]
    return body.strip()


def parse_structured(text: str, schema: type[BaseModel]) -> BaseModel:
    body = unfence(text)
    if not body.strip():
        raise LLMOutputError("empty reply: expected a JSON object", raw=text)
    data = strict_loads(body)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])[:120] or '(top level)'}: {e['msg']}"
                          for e in exc.errors()[:5])
        raise LLMOutputError(f"schema-invalid {schema.__name__}: {one_line(where, 400)}", raw=text) from None


def tool_call(c: dict[str, str]) -> ToolCallOut:
    name = c["name"]
    if not name:
        raise LLMOutputError("a tool call without a tool name", raw=c["arguments"])
    args = strict_loads(c["arguments"] or "{}", what=f"arguments of tool call {name[:80]}")
    if not isinstance(args, dict):
        raise LLMOutputError(f"tool call {name[:80]}: arguments must be a JSON object", raw=c["arguments"])
    return ToolCallOut(id=c["id"], name=name, arguments=args)


def interpret(reply: dict[str, Any], schema: type[BaseModel] | None, max_tokens: int | None):
    """(text, parsed, tool_calls, finish_reason) of a normalized reply, or ``LLMOutputError``."""
    text, finish = reply.get("text") or "", reply.get("finish_reason") or ""
    try:
        if reply.get("refusal"):
            raise LLMOutputError(f"the model refused: {reply['refusal']}", raw=reply["refusal"])
        if len(text) > MAX_REPLY_CHARS:
            raise LLMOutputError(f"the reply is too large (over {MAX_REPLY_CHARS:,} characters)", raw=text[:2000])
        calls = [tool_call(c) for c in reply.get("tool_calls") or []]
        if finish == "length":
            raw = text or json.dumps(reply.get("tool_calls") or [])
            raise LLMOutputError(f"truncated: the reply hit max_tokens={max_tokens} (raise max_tokens or ask for "
                                 "less)", raw=raw)
        parsed = None
        if schema is not None and not (calls and not text.strip()):  # a tool call instead of the answer: caller acts
            parsed = parse_structured(text, schema)
        return text, parsed, calls, finish
    except LLMOutputError as exc:
        exc.finish_reason = finish
        raise
    except Exception as exc:  # a reply this module failed to foresee is still a rejection, never a crash
        raise LLMOutputError(f"unusable reply ({type(exc).__name__}: {one_line(exc)})", raw=text[:2000],
                             finish_reason=finish) from None
