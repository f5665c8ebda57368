"""A policy-following trajectory built from a task's gold actions.

Used by `evosyn verify --official` and the agreement tests: the user states the
request, the assistant runs each gold action (asking for explicit confirmation
before every state-changing call, naming the action and the ids it touches),
and finally tells the user the information the task requires.
"""
from __future__ import annotations

import json
from typing import Any

from evosyn.envs.base import Domain, EnvTask
from evosyn.envs.pack_errors import run_tool
from evosyn.storage.records import Message, ToolCall

AFFIRMATIVE = "Yes, please go ahead."


def action_phrase(name: str, arguments: dict[str, Any]) -> str:
    ids = [f"{k.replace('_', ' ')} {v}" for k, v in arguments.items() if k.endswith("_id") and isinstance(v, str)]
    details = json.dumps({k: v for k, v in arguments.items()}, sort_keys=True)
    return f"{name.replace('_', ' ')} ({', '.join(ids) or 'no ids'}) with {details}"


def device_request(name: str, arguments: dict[str, Any]) -> str:
    """How an agent asks the user to perform a device action (dual-control domains): it names the user tool."""
    args = f" with {json.dumps(arguments, sort_keys=True)}" if arguments else ""
    return f"Please do this on your device: run {name}{args}."


def confirmation_request(name: str, arguments: dict[str, Any]) -> str:
    return f"Before I proceed: I am going to {action_phrase(name, arguments)}. Do you confirm (yes/no)?"


def opening_message(task: EnvTask) -> str:
    scenario = task.scenario
    parts = [scenario.reason_for_call, scenario.known_info]
    return "\n".join(p.strip() for p in parts if p)


def gold_messages(domain: Domain, task: EnvTask) -> list[Message]:
    episode = domain.episode(task.initial_state)
    messages = [Message(role="user", content=opening_message(task), requestor="user")]
    for n, action in enumerate(task.gold_actions):
        call = ToolCall(id=f"call_{n}", name=action.name, arguments=dict(action.arguments),
                        requestor=action.requestor)
        kind = domain.tool_kind(action.name, action.requestor)
        if action.requestor == "user":
            messages.append(Message(role="assistant", content=device_request(action.name, action.arguments)))
            messages.append(Message(role="user", tool_calls=[call], requestor="user"))
        else:
            if kind == "write":
                messages.append(Message(role="assistant", content=confirmation_request(action.name, action.arguments)))
                messages.append(Message(role="user", content=AFFIRMATIVE, requestor="user"))
            messages.append(Message(role="assistant", tool_calls=[call]))
        obs = run_tool(episode, action.name, action.arguments, action.requestor)
        messages.append(Message(role="tool", content=obs.content, tool_call_id=call.id, error=obs.error,
                                requestor=action.requestor))
    info = task.communicate_info
    closing = "I have completed your request."
    if info:
        closing += " Here is what you asked about: " + "; ".join(info) + "."
    messages.append(Message(role="assistant", content=closing))
    return messages
