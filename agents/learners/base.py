"""The task-agent interface and what an agent may see."""
from __future__ import annotations

from typing import Any, Protocol

from evosyn.storage.records import Message


class TaskAgent(Protocol):
    """Given the conversation so far (user, assistant, tool messages), the next assistant message.

    An agent sees only what a deployed agent sees: the messages and the tool
    schemas (and the policy text); never gold actions, scenarios or the DB.
    """

    name: str

    def reset(self, tools: list[dict[str, Any]], policy: str) -> None: ...

    def act(self, messages: list[Message]) -> Message: ...
