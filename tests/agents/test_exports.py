"""The exports and the served agent's requests: one view of a conversation (agents/learners/exports.py)."""
import json
import re

import pytest

from evosyn.agents.learners.exports import RESULTS_JOIN, ExportError, agent_turns, export_rows, openai_messages, sharegpt
from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent, to_openai
from evosyn.storage.records import Message, SFTExample, ToolCall
from tests.fakes.openai_server import ScriptedServer, completion

TOOLS = [{"type": "function", "function": {"name": "get_user", "description": "d", "parameters": {}}}]
A = ToolCall(id="a", name="get_user", arguments={"user_id": "u1"})
B = ToolCall(id="b", name="get_reservation", arguments={"reservation_id": "R1"})


def example(messages, example_id="e1"):
    return SFTExample(run_id="r", round=1, example_id=example_id, task_id="t", trajectory_id="tr",
                      messages=messages, tools=TOOLS)


PARALLEL = [Message(role="user", content="hi"), Message(role="assistant", content="Let me look."),
            Message(role="assistant", tool_calls=[A, B]), Message(role="tool", content="U", tool_call_id="a"),
            Message(role="tool", content="R", tool_call_id="b"), Message(role="assistant", content="Done."),
            Message(role="user", content="bye")]


def test_parallel_calls_stay_one_turn_with_their_text_and_the_policy_as_system():
    row = sharegpt(example(PARALLEL), system="POLICY")
    assert row["system"] == "POLICY" and json.loads(row["tools"]) == TOOLS
    kinds = [t["from"] for t in row["conversations"]]
    assert kinds == ["human", "function_call", "observation", "gpt"]  # the goodbye carries no target: left out
    call = row["conversations"][1]["value"]
    assert call.startswith("Let me look.<tool_call>") and call.endswith("</tool_call>")
    calls = json.loads(call[len("Let me look.<tool_call>"):-len("</tool_call>")])
    assert calls == [{"name": "get_user", "arguments": {"user_id": "u1"}},
                     {"name": "get_reservation", "arguments": {"reservation_id": "R1"}}]
    assert row["conversations"][2]["value"] == f"U{RESULTS_JOIN}R"


def test_a_single_call_is_one_object_and_openai_keeps_ids_and_one_message_per_result():
    msgs = [PARALLEL[0], Message(role="assistant", tool_calls=[A]), Message(role="tool", content="U", tool_call_id="a"),
            Message(role="assistant", content="ok")]
    assert json.loads(sharegpt(example(msgs))["conversations"][1]["value"]) == {"name": "get_user",
                                                                                "arguments": {"user_id": "u1"}}
    oa = openai_messages(example(PARALLEL), system="POLICY")["messages"]
    assert [m["role"] for m in oa] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in oa[2]["tool_calls"]] == ["a", "b"] and oa[3]["tool_call_id"] == "a"
    assert json.loads(oa[2]["tool_calls"][1]["function"]["arguments"]) == {"reservation_id": "R1"}


def test_the_users_device_actions_are_part_of_the_users_turn():
    device = ToolCall(id="d1", name="toggle_airplane_mode", requestor="user")
    msgs = [Message(role="user", content="my phone is offline"), Message(role="assistant", content="toggle it"),
            Message(role="user", content="done", tool_calls=[device], requestor="user"),
            Message(role="tool", content="airplane mode off", tool_call_id="d1", requestor="user"),
            Message(role="assistant", content="fixed?")]
    turns = agent_turns(msgs)
    assert [t.kind for t in turns] == ["human", "gpt", "human", "gpt"]
    assert turns[2].text == "done\n[toggle_airplane_mode on my device] airplane mode off"


@pytest.mark.parametrize("messages, reason", [
    ([PARALLEL[0], Message(role="assistant", tool_calls=[A, B]), PARALLEL[3], PARALLEL[5]], "2 tool calls but 1 results"),
    ([PARALLEL[0], Message(role="assistant", tool_calls=[A]), Message(role="user", content="?")],
     "function_call followed by human (a call without its result)"),
    ([PARALLEL[0], PARALLEL[3], PARALLEL[5]], "a tool result without its call"),
    ([Message(role="assistant", content="hello"), PARALLEL[0], PARALLEL[5]], "must start with a user message"),
])
def test_a_conversation_that_cannot_be_held_is_counted_with_its_reason(messages, reason):
    with pytest.raises(ExportError, match=re.escape(reason)):
        sharegpt(example(messages))
    out = export_rows([example(PARALLEL), example(messages, "bad")], sharegpt, "P")
    assert len(out.rows) == 1 and out.dropped == {reason: 1}
    assert out.line(4) == f"exported 1, dropped 1 ({reason}: 1); held out 4 diagnostic (evaluation only, never " \
                          "trained on)"


def test_the_served_agents_request_alternates_strictly():
    """`llamafactory-cli api` takes system, then user / assistant turns alternating, ending on the user side."""
    live = PARALLEL[:5]  # the agent is to answer the two results
    req = to_openai(live, "POLICY")
    assert [m["role"] for m in req] == ["system", "user", "assistant", "tool"]
    assert req[3]["content"] == f"U{RESULTS_JOIN}R" and req[2]["content"] == "Let me look."


def test_the_agent_keeps_every_parallel_call_of_a_reply():
    reply = completion(tool_call={"id": "c1", "name": "get_user", "arguments": {"user_id": "u1"}})
    reply["choices"][0]["message"]["tool_calls"].append(
        {"id": "c2", "type": "function", "function": {"name": "get_reservation", "arguments": '{"reservation_id": "R1"}'}})
    with ScriptedServer(lambda body: reply) as server:
        agent = OpenAICompatibleAgent(base_url=server.base_url, model="scripted")
        agent.reset(TOOLS, "POLICY")
        msg = agent.act([PARALLEL[0]])
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [("c1", "get_user", {"user_id": "u1"}),
                                                                      ("c2", "get_reservation", {"reservation_id": "R1"})]


def test_every_view_converts_a_message_alike():
    """The exports, the record rows and the teacher's prompt all go through ``exports.chat_message``: on a
    conversation each view keeps one for one (no merged turns, no device actions) they give the same messages."""
    from evosyn.agents.learners.exports import chat_message, trajectory_messages
    from evosyn.agents.teacher import to_chat

    msgs = [Message(role="user", content="hi"), Message(role="assistant", tool_calls=[A]),
            Message(role="tool", content="U", tool_call_id="a"), Message(role="assistant", content="Done.")]
    expected = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "a", "type": "function",
                     "function": {"name": "get_user", "arguments": json.dumps({"user_id": "u1"})}}]},
                {"role": "tool", "tool_call_id": "a", "content": "U"}, {"role": "assistant", "content": "Done."}]
    assert [chat_message(m) for m in msgs] == expected
    assert to_chat(msgs) == expected
    assert trajectory_messages(example(msgs))["messages"] == expected
    assert openai_messages(example(msgs))["messages"] == expected
    assert to_openai(msgs, "P") == [{"role": "system", "content": "P"}, *expected]
    # the teacher sees a user's device action and its result as what the user says
    device = [Message(role="user", requestor="user", tool_calls=[ToolCall(id="d", name="toggle_airplane_mode",
                                                                          requestor="user")]),
              Message(role="tool", content="off", tool_call_id="d", requestor="user")]
    assert to_chat(device) == [{"role": "user", "content": "(on my device: toggle_airplane_mode)"},
                               {"role": "user", "content": "My device shows: off"}]
