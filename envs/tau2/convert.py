"""Between our ``Message`` records and tau2's message objects (tasks: ``task.py``)."""
from __future__ import annotations

from typing import Any, Iterable

from loguru import logger

from evosyn.storage.records import Message, ToolCall

logger.disable("tau2")  # tau2 warns about a missing .env on import: no environment of ours needs one


def to_tau2_messages(messages: Iterable[Message]) -> list[Any]:
    from tau2.data_model.message import AssistantMessage, SystemMessage, ToolMessage, UserMessage
    from tau2.data_model.message import ToolCall as Tau2ToolCall

    out: list[Any] = []
    for m in messages:
        calls = [Tau2ToolCall(id=c.id, name=c.name, arguments=dict(c.arguments), requestor=c.requestor)
                 for c in m.tool_calls] or None
        if m.role == "assistant":
            out.append(AssistantMessage(role="assistant", content=m.content, tool_calls=calls))
        elif m.role == "user":
            out.append(UserMessage(role="user", content=m.content, tool_calls=calls))
        elif m.role == "tool":
            out.append(ToolMessage(id=m.tool_call_id or "", role="tool", content=m.content,
                                   requestor=m.requestor, error=m.error))
        else:
            out.append(SystemMessage(role="system", content=m.content))
    return out


def from_tau2_messages(messages: Iterable[Any]) -> list[Message]:
    out = []
    for m in messages:
        role = m.role.value if hasattr(m.role, "value") else str(m.role)
        if role == "tool":
            out.append(Message(role="tool", content=m.content, tool_call_id=m.id, error=m.error,
                               requestor=m.requestor))
            continue
        calls = [ToolCall(id=c.id, name=c.name, arguments=dict(c.arguments), requestor=c.requestor)
                 for c in (getattr(m, "tool_calls", None) or [])]
        requestor = "user" if role == "user" else "assistant"
        out.append(Message(role=role, content=m.content, tool_calls=calls, requestor=requestor))
    return out


def simulation_run(task_id: str, messages: list[Message], termination: str = "agent_stop") -> Any:
    """A tau2 ``SimulationRun`` so tau2's own evaluator can score our trajectory."""
    from tau2.data_model.simulation import SimulationRun, TerminationReason

    return SimulationRun(id=f"sim-{task_id}", task_id=task_id, start_time="", end_time="", duration=0.0,
                         termination_reason=TerminationReason(termination),
                         messages=to_tau2_messages(messages))
