"""Shared by the toy-domain learner tests: a learner plays a toy desk against a user who confirms only its own request."""
from __future__ import annotations

from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.storage.records import Message


def play(learner: EmbeddedLearner, tools: list[dict], desk, wanted: str, max_steps: int = 16,
         policy: str = "") -> list[Message]:
    """``desk``: ``opening()`` and ``step(name, args) -> text``; the user confirms only a request naming ``wanted``;
    ``policy``: the system prompt the learner is given."""
    learner.reset(tools, policy)
    msgs = [Message(role="user", content=desk.opening())]
    for _ in range(max_steps):
        reply = learner.act(list(msgs))
        msgs.append(reply)
        if reply.tool_calls:
            c = reply.tool_calls[0]
            content = desk.step(c.name, c.arguments)
            msgs.append(Message(role="tool", content=content, tool_call_id=c.id, error=content.startswith("Error")))
            continue
        text = (reply.content or "").lower()
        if "confirm" in text:
            msgs.append(Message(role="user", content="Yes, please go ahead." if wanted.lower() in text
                                else "No, that is not what I asked for."))
        elif "anything else" in text:
            msgs.append(Message(role="user", content="No, that is everything."))
        else:
            break
    return msgs
