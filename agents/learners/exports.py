"""Training-data exports: LLaMA-Factory ShareGPT (with tools), OpenAI chat JSONL, tau2 task JSON.

ShareGPT follows LLaMA-Factory's rules: the conversation starts on the user
side, user-side turns (``human``, ``observation``) and assistant-side turns
(``gpt``, ``function_call``) alternate, and it ends on the assistant side;
``tools`` is a JSON string. A trajectory that cannot be put in that shape
raises ``ExportError`` rather than being silently mangled.
"""
from __future__ import annotations

import json
from typing import Any

from storage.records import Message, SFTExample, SynthTask

DATASET_NAME = "evosyn"


class ExportError(ValueError):
    pass


def _side(m: Message) -> str:
    if m.role == "tool" or (m.role == "user" and not m.tool_calls):
        return "user"
    return "assistant"


def sharegpt(example: SFTExample, system: str = "") -> dict[str, Any]:
    turns: list[dict[str, str]] = []
    for m in example.messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            turn = {"from": "observation", "value": m.content or ""}
        elif m.role == "user":
            turn = {"from": "human", "value": m.content or ""}
        elif m.tool_calls:
            if len(m.tool_calls) != 1:
                raise ExportError(f"{example.example_id}: one tool call per turn is supported, got {len(m.tool_calls)}")
            call = m.tool_calls[0]
            turn = {"from": "function_call", "value": json.dumps({"name": call.name, "arguments": call.arguments})}
        else:
            turn = {"from": "gpt", "value": m.content or ""}
        side = "user" if turn["from"] in ("human", "observation") else "assistant"
        if turns and side == ("user" if turns[-1]["from"] in ("human", "observation") else "assistant"):
            if turn["from"] == turns[-1]["from"] and turn["from"] in ("human", "gpt"):
                turns[-1]["value"] += "\n" + turn["value"]  # two texts in a row from one side: one turn
                continue
            raise ExportError(f"{example.example_id}: {turns[-1]['from']} followed by {turn['from']}")
        turns.append(turn)
    while turns and turns[-1]["from"] in ("human", "observation"):
        turns.pop()  # the user's goodbye carries no assistant target
    if not turns or turns[0]["from"] != "human":
        raise ExportError(f"{example.example_id}: must start with a user message")
    return {"conversations": turns, "system": system, "tools": json.dumps(example.tools)}


def dataset_info(file_name: str, name: str = DATASET_NAME) -> dict[str, Any]:
    return {name: {"file_name": file_name, "formatting": "sharegpt",
                   "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
                   "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human",
                            "assistant_tag": "gpt", "observation_tag": "observation",
                            "function_tag": "function_call", "system_tag": "system"}}}


def openai_messages(example: SFTExample, system: str = "") -> dict[str, Any]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in example.messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content or ""})
        elif m.tool_calls:  # its own role: a user may call tools of its own (dual control)
            out.append({"role": m.role, "content": m.content, "tool_calls": [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in m.tool_calls]})
        else:
            out.append({"role": m.role, "content": m.content or ""})
    return {"messages": out, "tools": example.tools}


def tau2_tasks(tasks: list[SynthTask]) -> list[dict[str, Any]]:
    return [t.tau2_task for t in tasks]
