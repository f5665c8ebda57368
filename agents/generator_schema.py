"""The Generator's reply contract, and the closed form of it that goes to the model for one domain.

``GeneratorOut`` is what the role validates. Its gold actions' and intents' ``arguments`` are open objects
(``dict[str, Any]``), and a grammar-constrained decoder (llama.cpp's server, vLLM) cannot bound an open object's
number of keys: a small model went on adding keys until ``max_tokens``. ``closed_output(domain)`` is the same
contract with those objects closed by the domain's own tools: a gold action is one of the tools, ``name`` fixed
to it (``enum``, which OpenAI's strict subset, llama.cpp's json-schema-to-grammar and vLLM all read), its
``arguments`` that tool's own JSON schema with every object closed; an intent's ``arguments`` name only the
tools' ids. Whatever fits the closed schema fits ``GeneratorOut`` (it only narrows), and the
role's validation is unchanged. A device action of a dual-control domain is a user tool with ``requestor``
``"user"``.

``closed_output(domain, ids)`` narrows it further for one prompt: a string argument named ``X_id`` (and the
reply's ``user_id``) may only be one of the ids of that name the prompt shows (``entity_ids``). The Generator
writes its gold actions from the prompt alone, so an id it did not see is one the database refuses anyway; and
a closed choice of short ids leaves a small model no room to fill the field until ``max_tokens``.
"""
from __future__ import annotations

import copy
import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model

from evosyn.agents.llm.types import ClosedSchema
from evosyn.envs.base import Domain


class IntentOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    say: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


# a tool call (also the Repair's, in the messages it revises). No docstring here or on the other reply models:
# pydantic would put it in their JSON schemas, and so in what the model is sent and in the cache keys
class ActionOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class GoldActionOut(ActionOut):
    # "user": a device action the user performs on their own phone (a user tool of a dual-control domain)
    requestor: Literal["assistant", "user"] = "assistant"


class GeneratorOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str
    intents: list[IntentOut] = Field(min_length=1)
    gold_actions: list[GoldActionOut]
    communicate_info: list[str] = Field(default_factory=list)
    refusal_rule: str = ""
    side_requests: list[str] = Field(default_factory=list)  # small lookups the user asks for first
    task_instructions: str = ""


def _inline(node: Any, defs: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every ``#/$defs/X`` reference replaced by X. A tool's definitions sit at its own root, and
    its arguments are nested inside the Generator's schema, where those references would point nowhere (and
    llama.cpp resolves references at the root only). jsonschema's ``referencing`` resolves a reference but
    writes no schema without them, hence these lines; a recursive definition cannot be inlined: refused."""
    if isinstance(node, list):
        return [_inline(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            raise ValueError(f"cannot inline {ref}: {'recursive' if name in seen else 'undefined'}")
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return {**_inline(defs[name], defs, (*seen, name)), **siblings}
    return {k: _inline(v, defs, seen) for k, v in node.items() if k != "$defs"}


def _close(node: Any) -> Any:
    """Every object that lists its properties and says nothing of others gets ``additionalProperties: false``
    (JSON Schema's default is open; llama.cpp reads an absent one as closed, OpenAI and vLLM do not). A free
    mapping offered beside a structured object (tau2's ``list[FlightInfo | dict]``: the tool's leniency to its
    callers) is left out, so the model writes the structured form; a free mapping alone stays what it is."""
    if isinstance(node, list):
        return [_close(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _close(v) for k, v in node.items()}
    alternatives = out.get("anyOf")
    if isinstance(alternatives, list) and any(_structured(a) for a in alternatives):
        kept = [a for a in alternatives if not _free(a)]
        out = {**{k: v for k, v in out.items() if k != "anyOf"}, **kept[0]} if len(kept) == 1 else {**out,
                                                                                                 "anyOf": kept}
    if isinstance(out.get("properties"), dict) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _structured(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("properties"), dict) and bool(node["properties"])


def _free(node: Any) -> bool:
    return (isinstance(node, dict) and node.get("type") == "object" and not node.get("properties")
            and node.get("additionalProperties", True) is not False)


def tool_arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's arguments schema, self-contained (references inlined) and closed."""
    body = _inline(copy.deepcopy(parameters), parameters.get("$defs", {}))
    if "properties" not in body and "additionalProperties" not in body and body.get("type", "object") == "object":
        body = {**body, "type": "object", "properties": {}}  # no arguments: exactly {}
    return _close(body)


def _action(name: str, requestor: str, parameters: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {"name": {"type": "string", "enum": [name]}}
    if requestor == "user":  # the agent's calls leave it out: GoldActionOut's default is the agent
        props["requestor"] = {"type": "string", "enum": ["user"]}
    props["arguments"] = tool_arguments(parameters)
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _is_id(key: str, prop: Any) -> bool:
    return key.endswith("_id") and isinstance(prop, dict) and prop.get("type") == "string"


def _intent_arguments(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The ids a request is about: each string argument of a tool whose name ends in ``_id``, optional. That is
    all the user simulator reads of them (``evosyn.agents.user``: the ids it recognises); every other argument an
    intent could name would only be room for a small model to write until ``max_tokens``."""
    props: dict[str, Any] = {}
    for tool in tools:
        for key, prop in tool_arguments(tool["parameters"]).get("properties", {}).items():
            if _is_id(key, prop):
                props.setdefault(key, {"type": "string"})
    return {"type": "object", "properties": props, "additionalProperties": False}


def _only_ids(node: Any, ids: dict[str, list[str]]) -> Any:
    """``node`` with each string property ``X_id`` that ``ids`` names limited to those values (``enum``)."""
    if isinstance(node, list):
        return [_only_ids(v, ids) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _only_ids(v, ids) for k, v in node.items()}
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: {**v, "enum": ids[k]} if _is_id(k, v) and ids.get(k) else v
                             for k, v in props.items()}
    return out


def entity_ids(entities: Any) -> dict[str, list[str]]:
    """Every id the prompt's entities show, by its key: the string values of keys ending in ``_id``, sorted."""
    found: dict[str, set[str]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and key.endswith("_id") and isinstance(value, str) and value:
                    found.setdefault(key, set()).add(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(entities)
    return {key: sorted(values) for key, values in sorted(found.items())}


@functools.lru_cache(maxsize=8)
def _tool_parts(tools_json: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An intent's arguments and each tool's gold action, closed: built once per tool set (every prompt's schema
    narrows these; ``_only_ids`` copies what it narrows, so they are never changed)."""
    tools = json.loads(tools_json)
    if not tools:
        raise ValueError("a domain without tools has no gold actions to write")
    return _intent_arguments(tools), [_action(t["name"], t["requestor"], t["parameters"]) for t in tools]


@functools.lru_cache(maxsize=64)
def _closed(tools_json: str, ids_json: str = "{}") -> type[GeneratorOut]:
    (intent_args, tool_actions), ids = _tool_parts(tools_json), json.loads(ids_json)
    intent = copy.deepcopy(IntentOut.model_json_schema())
    intent["properties"]["arguments"] = _only_ids(intent_args, ids)
    intents = {"type": "array", "items": intent, "minItems": 1}
    actions = {"type": "array", "items": {"anyOf": [_only_ids(action, ids) for action in tool_actions]}}
    user = {"type": "string", **({"enum": ids["user_id"]} if ids.get("user_id") else {})}
    # the same class name: the name the reply schema goes by (OpenAI's json_schema name, Anthropic's answer tool)
    return create_model("GeneratorOut", __base__=(GeneratorOut, ClosedSchema), __module__=__name__,
                        user_id=(Annotated[str, WithJsonSchema(user)], ...),
                        intents=(Annotated[list[IntentOut], Field(min_length=1), WithJsonSchema(intents)], ...),
                        gold_actions=(Annotated[list[GoldActionOut], WithJsonSchema(actions)], ...))


def closed_output(domain: Domain, ids: dict[str, list[str]] | None = None) -> type[GeneratorOut]:
    """``GeneratorOut`` whose JSON schema is closed by ``domain``'s tools (the agent's, then the user's device
    tools where the domain has them), and its ``X_id`` strings limited to ``ids`` (``entity_ids`` of the prompt)
    where given; one class per tool set and ids, so its schema and cache key are built once."""
    tools = [{"name": s.name, "requestor": requestor, "parameters": s.parameters}
             for requestor in ("assistant", "user") for s in domain.tools(requestor)]
    # the tools' own property order: the order the model writes them in
    return _closed(json.dumps(tools), json.dumps(ids or {}, sort_keys=True))
