"""The Generator's closed reply schema (agents/generator_schema.py): every object closed by the domain's tools,
every good reply of it, nothing the role's own validation refuses, and a device action only as the user's."""
from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field, ValidationError

from evosyn.agents.ask import tools_summary
from evosyn.agents.generator import candidate_entities, generator_messages
from evosyn.agents.generator_schema import GeneratorOut, closed_output, entity_ids, tool_arguments
from evosyn.agents.llm.providers import bounded_schema, strict_json_schema
from evosyn.agents.llm.types import ClosedSchema
from evosyn.agents.roles import env_context
from evosyn.benchmarks.llm_script import RoleScript
from evosyn.envs.packs import get_domain

DOMAINS = ["airline", "retail", "telecom"]


@pytest.fixture(scope="module", params=DOMAINS)
def replies(request, tmp_path_factory):
    """(domain, the closed schema sent, good replies, the ids each reply's prompt showed): the scripted competent
    model's replies to the Generator's prompts for eight embedded blueprints (``evosyn.benchmarks.llm_script``: the
    embedded builder's plans)."""
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.storage.store import Store
    from evosyn.tasks import stages
    from evosyn.tasks.stages import Ctx

    name = request.param
    dom = get_domain(name)
    space = load_initial_space(dom.pack, run_id="gs")
    ctx = Ctx(Store(tmp_path_factory.mktemp(name)), "gs", 1, 0, get_domain(name))
    script, env = RoleScript(dom), env_context(dom)
    out, shown = [], []
    for bp in stages.plan(ctx, space, stages.design(ctx, space, ColdStart(), 8, "evosyn")):
        entities = candidate_entities(dom, bp)
        prompt = generator_messages(bp, env, entities, tools_summary(dom, "user"))[0]["content"]
        try:
            out.append(script.generator(prompt))
        except ValueError:  # a plan whose starting state the reply cannot carry (a telecom bill): no reply
            continue
        shown.append(entity_ids(entities))
    body, _ = strict_json_schema(closed_output(dom))
    jsonschema.Draft202012Validator.check_schema(body)
    return dom, jsonschema.Draft202012Validator(body), out, shown


def _ids_written(node: Any, key: str = "") -> set[tuple[str, str]]:
    if isinstance(node, dict):
        return set().union(*(_ids_written(v, k) for k, v in node.items())) if node else set()
    if isinstance(node, list):
        return set().union(*(_ids_written(v, key) for v in node)) if node else set()
    return {(key, node)} if key.endswith("_id") and isinstance(node, str) else set()


def test_the_schema_sent_with_a_prompt_allows_only_the_ids_it_shows(replies):
    """The schema sent with one prompt limits every ``X_id`` string to the ids of that name the prompt shows. The
    scripted model writes the embedded builder's plans, whose customer is not always one the prompt shows: with
    its ids swapped for shown ones of the same name, each of its replies fits; an id the prompt does not show is
    refused, wherever it is written (a gold action, an intent, the reply's ``user_id``)."""
    dom, _, good, shown_ids = replies
    limited = 0
    for reply, ids in zip(good, shown_ids, strict=True):
        validator = jsonschema.Draft202012Validator(strict_json_schema(closed_output(dom, ids))[0])
        written = sorted((k, v) for k, v in _ids_written(reply) if ids.get(k))
        shown = copy.deepcopy(reply)
        for n, (key, value) in enumerate(written):
            _replace(shown, key, value, ids[key][n % len(ids[key])])
        validator.validate(shown)
        limited += len(written)
        for key, value in written[:1]:
            wrong = copy.deepcopy(shown)
            _replace(wrong, key, _ids_written_value(wrong, key), "ZZ-not-shown")
            GeneratorOut.model_validate(wrong)  # the role's own contract takes it (the database refuses it later)
            with pytest.raises(jsonschema.ValidationError):
                validator.validate(wrong)
    assert limited >= len(good)  # every reply writes at least one id of a name the prompts show
    assert closed_output(dom, shown_ids[0]) is closed_output(dom, dict(shown_ids[0]))


def _ids_written_value(node: Any, key: str) -> str:
    return next(v for k, v in sorted(_ids_written(node)) if k == key)


def _replace(node: Any, key: str, old: str, new: str) -> None:
    """Every ``key: old`` in ``node`` (nested anywhere) made ``key: new``."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and v == old:
                node[k] = new
            else:
                _replace(v, key, old, new)
    elif isinstance(node, list):
        for v in node:
            _replace(v, key, old, new)


def test_entity_ids_are_every_string_under_a_key_ending_in_id():
    entities = {"customers": [{"user_id": "u2", "orders": [{"order_id": "#W1", "items": [{"item_id": "9"}]}]},
                              {"user_id": "u1", "payment_methods": {"gift_card_1": "gift_card"}, "zip": "1"}],
                "now": "2024-05-15", "bad_id": 7}
    assert entity_ids(entities) == {"item_id": ["9"], "order_id": ["#W1"], "user_id": ["u1", "u2"]}


def _objects(node: Any):
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for v in node.values():
            yield from _objects(v)
    elif isinstance(node, list):
        for v in node:
            yield from _objects(v)


def test_every_good_reply_fits_the_closed_schema_and_every_object_of_it_is_closed(replies):
    dom, validator, good, _ = replies
    body = validator.schema
    assert len(good) >= 6
    for reply in good:
        validator.validate(reply)
    assert "$defs" not in body and "$ref" not in str(body)  # each tool's definitions inlined
    for obj in _objects(body):
        assert obj.get("additionalProperties") is False and isinstance(obj.get("properties"), dict), obj
    variants = body["properties"]["gold_actions"]["items"]["anyOf"]
    names = [(v["properties"]["name"]["enum"], "requestor" in v["properties"]) for v in variants]
    assert names == [([s.name], False) for s in dom.tools("assistant")] + [([s.name], True) for s in dom.tools("user")]
    if dom.tools("user"):  # telecom: the replies hold device actions, each the user's
        assert any(a.get("requestor") == "user" for r in good for a in r["gold_actions"])


def test_the_closed_schema_refuses_what_grows_without_bound_and_the_other_sides_tools(replies):
    """What the open schema let a small model write until max_tokens (keys beside a tool's arguments, an
    invented tool) the closed one refuses, and a device action is the user's, never the agent's."""
    dom, validator, good, _ = replies
    reply = good[0]
    extra_key = copy.deepcopy(reply)
    extra_key["gold_actions"][0]["arguments"]["note"] = "x"
    unknown = copy.deepcopy(reply)
    unknown["gold_actions"][0] = {"name": "teleport_passenger", "arguments": {}}
    intent_key = copy.deepcopy(reply)
    intent_key["intents"][0]["arguments"] = {"anything": "x"}
    bad = [extra_key, unknown, intent_key]
    if dom.tools("user"):
        device, agent = dom.tools("user")[0], dom.tools("assistant")[0]
        bad.append({**reply, "gold_actions": [{"name": device.name,  # no requestor
                                               "arguments": _least(tool_arguments(device.parameters))}]})
        bad.append({**reply, "gold_actions": [{"name": agent.name, "requestor": "user",
                                               "arguments": _least(tool_arguments(agent.parameters))}]})
    for reply in bad:
        GeneratorOut.model_validate(reply)  # the role's own contract takes it (its checks refuse it later) ...
        with pytest.raises(jsonschema.ValidationError):  # ... the schema sent does not let it be written
            validator.validate(reply)


def _least(schema: dict) -> Any:
    """The smallest instance of ``schema``: every required property, every array empty (or minItems long)."""
    if "anyOf" in schema:
        return _least(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: _least(v) for k, v in schema["properties"].items() if k in schema.get("required", [])}
    if kind == "array":
        return [_least(schema["items"])] * schema.get("minItems", 0)
    return {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "null": None}[kind]


def test_whatever_the_closed_schema_allows_the_role_parses(replies):
    """It only narrows GeneratorOut: each tool's call, with every argument it may carry, is a GeneratorOut."""
    dom, validator, good, _ = replies
    for variant in validator.schema["properties"]["gold_actions"]["items"]["anyOf"]:
        args = variant["properties"]["arguments"]
        full = {k: _least(v) for k, v in args["properties"].items()}  # optional arguments too
        call = {**_least(variant), "arguments": full}
        reply = {**good[0], "gold_actions": [call]}
        validator.validate(reply)
        parsed = closed_output(dom).model_validate(reply)
        assert parsed.gold_actions[0].requestor == call.get("requestor", "assistant")
        assert parsed.gold_actions[0].arguments == full


def test_tool_arguments_inline_references_and_close_objects_but_not_free_mappings():
    tool = {"type": "object", "$defs": {"Leg": {"type": "object", "properties": {"flight": {"type": "string"}}}},
            "properties": {"legs": {"type": "array", "items": {"$ref": "#/$defs/Leg"}},
                           "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                           "seat": {"$ref": "#/$defs/Leg", "description": "kept beside the reference"}},
            "required": ["legs"]}
    out = tool_arguments(tool)
    assert out["properties"]["legs"]["items"] == {"type": "object", "properties": {"flight": {"type": "string"}},
                                                  "additionalProperties": False}
    assert out["properties"]["seat"]["description"] == "kept beside the reference"
    assert out["properties"]["tags"] == tool["properties"]["tags"]  # a free mapping stays what the tool says
    assert out["required"] == ["legs"] and out["additionalProperties"] is False and "$defs" not in out
    assert tool_arguments({"type": "object"}) == {"type": "object", "properties": {}, "additionalProperties": False}
    with pytest.raises(ValueError, match="recursive"):
        tool_arguments({"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
                        "type": "object", "properties": {"head": {"$ref": "#/$defs/N"}}})


def test_a_closed_schema_goes_as_it_is_and_strict_only_where_openais_rules_hold():
    class Every(ClosedSchema):
        a: str
        b: list[int]

    class Some(ClosedSchema):
        a: str
        b: list[int] = Field(default_factory=list)

    class Plain(BaseModel):  # a plain model: the SDK's strict form, its defaulted field required
        a: str
        b: list[int] = Field(default_factory=list)

    every, strict = strict_json_schema(Every)
    assert strict and every == Every.model_json_schema()
    some, strict = strict_json_schema(Some)
    assert not strict and some["required"] == ["a"]  # its optional field stays optional
    plain, strict = strict_json_schema(Plain)
    assert strict and plain["required"] == ["a", "b"]


def test_bounds_narrow_free_strings_and_lists_of_the_closed_schema_not_tool_names():
    dom = get_domain("airline")
    body = bounded_schema(closed_output(dom), 40, 2)
    book = next(v for v in body["properties"]["gold_actions"]["items"]["anyOf"]
                if v["properties"]["name"]["enum"] == ["book_reservation"])
    assert "maxLength" not in book["properties"]["name"]
    args = book["properties"]["arguments"]["properties"]
    assert args["user_id"]["maxLength"] == 40 and args["passengers"]["maxItems"] == 2
    assert args["passengers"]["items"]["properties"]["dob"]["maxLength"] == 40
    assert body["properties"]["gold_actions"]["maxItems"] == 2 and body["properties"]["intents"]["maxItems"] == 2
    assert closed_output(dom) is closed_output(get_domain("airline"))  # one class per tool set
    with pytest.raises(ValidationError):
        closed_output(dom).model_validate({"user_id": "u", "intents": [], "gold_actions": []})  # min one intent
