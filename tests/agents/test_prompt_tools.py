"""Prompt-based tool calls (`tool_calls: prompt`) through the real client against the scripted server on 127.0.0.1."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent
from evosyn.agents.llm import LLMOutputError, make_client
from evosyn.agents.llm.prompt_tools import parse_tool_reply, prompt_messages, reminder
from evosyn.config import ConfigError, RoleConfig, validate_config
from evosyn.storage.records import Message
from tests.fakes.openai_server import FakeLLMServer, Script, openai_reply

TOOLS = [{"type": "function", "function": {
    "name": "get_user", "description": "Look up a user",
    "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}, "limit": {"type": "integer"}},
                   "required": ["user_id"]}}},
    {"type": "function", "function": {"name": "cancel", "description": "Cancel a reservation",
                                      "parameters": {"type": "object", "properties": {}}}}]
MSGS = [{"role": "system", "content": "You are an airline agent."}, {"role": "user", "content": "I am u2."}]
CALL = '{"name": "get_user", "arguments": {"user_id": "u2"}}'


def text(content: str):
    return lambda request: openai_reply(content)


def client(server, mode: str = "prompt"):
    role = RoleConfig(backend="llm", provider="openai_compatible", model="smol", base_url=server.base_url,
                      tool_calls=mode)
    return make_client("teacher", role, cache=False, backoff_initial_s=0.01, backoff_max_s=0.05)


@pytest.mark.parametrize("reply", [CALL, f"```json\n{CALL}\n```", f"<tool_call>\n{CALL}\n</tool_call>",
                                   f"Here is the call:\n```json\n{CALL}\n```\nDone."])
def test_a_call_in_the_text_is_a_tool_call_and_no_tools_are_sent(reply):
    with FakeLLMServer(text(reply)) as server:
        c = client(server)
        result = c.chat_sync(MSGS, tools=TOOLS, role="teacher")
        body = server.requests[0]["body"]
    assert [(t.name, t.arguments) for t in result.tool_calls] == [("get_user", {"user_id": "u2"})]
    assert result.text == "" and result.tool_calls[0].id.startswith("call_")
    assert "tools" not in body and "parallel_tool_calls" not in body
    system = body["messages"][0]["content"]
    assert system.startswith("You are an airline agent.") and "get_user(user_id: string, limit?: integer)" in system
    assert c.calls[-1].status == "ok"


def test_a_plain_reply_is_a_message():
    with FakeLLMServer(text("Could you give me your user id?")) as server:
        result = client(server).chat_sync(MSGS, tools=TOOLS)
    assert result.text == "Could you give me your user id?" and result.tool_calls == []


BAD = {
    "malformed": ('{"name": "get_user", "arguments": {"user_id": ', "malformed tool call JSON"),
    "unknown tool": ('{"name": "delete_everything", "arguments": {}}', "unknown tool 'delete_everything'"),
    "missing argument": ('{"name": "get_user", "arguments": {}}', "invalid arguments: (arguments): 'user_id' is a"),
    "wrong type": ('{"name": "get_user", "arguments": {"user_id": "u2", "limit": "ten"}}',
                   "invalid arguments: limit: 'ten' is not of type 'integer'"),
    "wrong shape": ('{"tool": "get_user", "args": {}}', 'a tool call must be {"name"'),
    "arguments not an object": ('{"name": "get_user", "arguments": ["u2"]}', "arguments must be a JSON object"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_call_is_an_invalid_row_with_the_raw_reply(case):
    reply, expected = BAD[case]
    with FakeLLMServer(text(reply)) as server:
        c = client(server)
        with pytest.raises(LLMOutputError) as info:
            c.chat_sync(MSGS, tools=TOOLS)
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert info.value.raw.startswith(reply[:20])
    assert c.calls[-1].status == "invalid" and c.calls[-1].error == str(info.value)


def test_native_mode_still_sends_the_tools():
    with FakeLLMServer(text("hello")) as server:
        client(server, "native").chat_sync(MSGS, tools=TOOLS)
        body = server.requests[0]["body"]
    assert body["tools"] == TOOLS and body["messages"] == MSGS


def test_history_with_calls_and_results_becomes_text():
    history = MSGS + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": '{"user_id": "u2"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"name": "Ann"}'}]
    out = prompt_messages(history, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert json.loads(out[2]["content"]) == {"name": "get_user", "arguments": {"user_id": "u2"}}
    assert out[3]["content"] == 'Tool result (get_user): {"name": "Ann"}\n\n' + reminder(TOOLS)
    assert '{"name": "cancel", "arguments": {}}' in reminder(TOOLS)  # the tool with the fewest required arguments
    assert out[1]["content"] == "I am u2."  # only the last user turn carries the reminder
    assert all(set(m) == {"role", "content"} for m in out)
    # no system message: the tools get one of their own
    assert prompt_messages(MSGS[1:], TOOLS)[0]["role"] == "system"


def test_the_teacher_reasks_a_bad_call_within_its_bound():
    from evosyn.agents.teacher import LLMTeacher
    from evosyn.envs.packs import get_domain

    dom = get_domain("airline")
    good = json.dumps({"name": "get_reservation_details", "arguments": {"reservation_id": "ABC123"}})
    with FakeLLMServer(Script(text('{"name": "nope", "arguments": {}}'), text(good))) as server:
        c = client(server)
        teacher = LLMTeacher(dom, c, retries=2)
        res = teacher._agent_turn([Message(role="user", content="Hi, reservation ABC123 please.")], dom.policy,
                                  teacher.tools)
        second = server.requests[1]["body"]["messages"]
    assert [t.name for t in res.tool_calls] == ["get_reservation_details"]
    assert [(r.status, r.attempt) for r in c.calls] == [("invalid", 0), ("ok", 1)]
    assert "unknown tool 'nope'" in c.calls[0].error and "unknown tool 'nope'" in second[-1]["content"]


def test_the_openai_agent_in_prompt_mode_records_and_reasks():
    with FakeLLMServer(Script(text("{not json"), text(CALL), text("All done."))) as server:
        agent = OpenAICompatibleAgent(base_url=server.base_url, model="smol", tool_calls="prompt", retries=1)
        agent.reset(TOOLS, "Be helpful.")
        first = agent.act([Message(role="user", content="I am u2.")])
        later = agent.act([Message(role="user", content="I am u2."), first,
                           Message(role="tool", tool_call_id=first.tool_calls[0].id, content='{"name": "Ann"}')])
        bodies = [r["body"] for r in server.requests]
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("get_user", {"user_id": "u2"})]
    assert later.content == "All done." and not later.tool_calls
    assert len(agent.rejected) == 1 and agent.rejected[0][1] == "{not json"
    assert all("tools" not in b for b in bodies) and "get_user(" in bodies[0]["messages"][0]["content"]
    assert bodies[2]["messages"][-1]["content"].startswith("Tool result (get_user)")


def test_an_unknown_mode_is_one_config_line():
    with pytest.raises(ConfigError) as info:
        validate_config({"backend": "llm", "roles": {"teacher": {"provider": "openai_compatible", "model": "m",
                                                                 "base_url": "http://127.0.0.1:1/v1",
                                                                 "tool_calls": "json"}}})
    assert "roles.teacher.tool_calls" in str(info.value) and "'native' or 'prompt'" in str(info.value)
    assert "\n" not in str(info.value)


def test_parse_is_strict_about_json():
    with pytest.raises(LLMOutputError, match="duplicate key"):
        parse_tool_reply('{"name": "get_user", "name": "cancel", "arguments": {}}', TOOLS)
    assert parse_tool_reply('{"name": "cancel", "arguments": {}}', TOOLS)[1][0].name == "cancel"
    assert parse_tool_reply("I will cancel it {soon}", TOOLS) == ("I will cancel it {soon}", [])


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
                     max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), _JSON.map(json.dumps),
                 st.dictionaries(st.sampled_from(["name", "arguments", "x"]),
                                 st.sampled_from(["get_user", "cancel", "zzz"]) | _JSON).map(json.dumps)))
def test_any_reply_is_a_call_a_message_or_an_output_error(reply):
    try:
        text, calls = parse_tool_reply(reply, TOOLS)
    except LLMOutputError as exc:
        assert "\n" not in str(exc)
        return
    assert (text, calls) == (reply, []) or (text == "" and len(calls) == 1 and calls[0].name in {"get_user", "cancel"})
