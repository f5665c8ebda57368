"""The LLM user in dual control (tau2's telecom): its device tools as tool calls, stepped in the user's state and
recorded as the embedded user's are; the text-only user's requests are unchanged."""
from __future__ import annotations

from evosyn.agents.llm.types import ChatResult, ToolCallOut
from evosyn.agents.user import DEVICE_NOTE, LLMUser, device_results
from evosyn.envs.packs import get_domain
from evosyn.storage.records import Message


class Replies:
    """A client answering from a list, keeping every request (messages and keyword arguments)."""

    def __init__(self, *replies: ChatResult):
        self.replies, self.requests = list(replies), []

    def chat_sync(self, messages, **kw):
        self.requests.append((messages, kw))
        return self.replies.pop(0)


def test_a_device_turn_is_a_user_tool_call_and_its_result_is_read_on_the_next_turn():
    dom = get_domain("telecom")
    tools = [t.openai_schema() for t in dom.tools("user")]
    name = dom.tools("user")[0].name
    client = Replies(ChatResult(text="Hi, my phone has no service."),
                     ChatResult(tool_calls=[ToolCallOut(id="c1", name=name, arguments={})]),
                     ChatResult(text="Done. ###STOP###"))
    user = LLMUser(client, "Why you are calling: no service", tools=tools)
    assert user.opening().content == "Hi, my phone has no service."
    turn = user.respond(f"Please do this on your device: run {name}.")
    assert turn.role == "user" and turn.requestor == "user" and turn.content is None
    assert [(c.name, c.requestor, c.id) for c in turn.tool_calls] == [(name, "user", "c1")]
    results = device_results(dom.episode(), turn)  # stepped as the user, on the user's device
    assert len(results) == 1 and results[0].requestor == "user" and results[0].tool_call_id == "c1"
    user.observe(results)
    last = user.respond("Thanks. What do you see now?")
    assert last.content == "Done." and user.done
    messages, kw = client.requests[-1]
    assert kw["tools"] == tools and DEVICE_NOTE in messages[0]["content"]
    call, result = messages[-3], messages[-2]  # its own call, the device's answer, then the agent's question
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == name
    assert result == {"role": "tool", "tool_call_id": "c1", "content": results[0].content}
    assert messages[-1] == {"role": "user", "content": "Thanks. What do you see now?"}


def test_a_user_without_device_tools_sends_the_requests_it_always_sent():
    client = Replies(ChatResult(text="Hello."), ChatResult(text="Bye ###STOP###"))
    user = LLMUser(client, "Why you are calling: a refund")
    user.opening()
    user.respond("How can I help?")
    messages, kw = client.requests[-1]
    assert "tools" not in kw and DEVICE_NOTE not in messages[0]["content"]
    assert messages[2:] == [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "How can I help?"}]
    # a tool call from a user that has no tools is not a usable turn: asked again
    client = Replies(ChatResult(tool_calls=[ToolCallOut(id="x", name="anything")]), ChatResult(text="Hi."))
    assert LLMUser(client, "s").opening() == Message(role="user", content="Hi.", requestor="user")
