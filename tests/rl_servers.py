"""Scripted policies for the exported RL environments, served by ``FakeLLMServer`` (tests/fakes) on 127.0.0.1.

A policy here is a script per task: the assistant messages it sends, one per policy turn. The server tells the
tasks apart by what every request opens with (the task's policy as the system message and the user's opening,
the row's ``prompt``) and the turn by how many assistant messages the request already holds, so it keeps no state
between requests and serves concurrent rollouts.

``gold_scripts``: each task's kept teacher trajectory, its assistant turns in order (what the embedded teacher
said and called); replayed against the environment's embedded user they solve the task. ``mistake_scripts``: the
same turns with one known mistake each (``MISTAKES``).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from evosyn.envs.base import Domain
from evosyn.storage.records import Message
from evosyn.storage.store import Store
from evosyn.tasks.exports.hf import select_examples

from tests.fakes.openai_server import FakeLLMServer, Request

CLOSING = "Thank you for contacting us. Goodbye."
MISTAKES = ("wrong_argument", "skip_write", "malformed_write", "end_early")


def chat(m: Message) -> dict[str, Any]:
    """An assistant record as the OpenAI chat message a model would send."""
    out: dict[str, Any] = {"role": "assistant", "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                             for c in m.tool_calls]
    return out


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def opening_key(messages: list[dict[str, Any]]) -> str:
    """What tells a task's conversations apart: its system message and the user's first message."""
    system = next((_text(m.get("content")) for m in messages if m["role"] == "system"), "")
    user = next((_text(m.get("content")) for m in messages if m["role"] == "user"), "")
    return hashlib.sha256(f"{system}\0{user}".encode()).hexdigest()


def teacher_turns(store: Store, run_id: str) -> dict[str, list[Message]]:
    """Each exported task's assistant turns in the teacher trajectory its training example came from."""
    wanted = {e.task_id: e.trajectory_id for e in select_examples(store, run_id).train}
    trajectories = {t.trajectory_id: t for t in store.read_records("trajectories", run_id=run_id)}
    return {task_id: [m for m in trajectories[tid].messages if m.role == "assistant"]
            for task_id, tid in wanted.items()}


def gold_scripts(rows: list[dict[str, Any]], turns: dict[str, list[Message]]) -> dict[str, list[dict]]:
    return {r["task_id"]: [chat(m) for m in turns[r["task_id"]]] for r in rows}


def _first_write(env: Domain, script: list[dict]) -> int | None:
    for n, m in enumerate(script):
        for c in m.get("tool_calls") or []:
            if env.tool_kind(c["function"]["name"], "assistant") == "write":
                return n
    return None


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7
    if isinstance(value, str):
        return value + "_wrong"
    return None


def mistaken(env: Domain, script: list[dict], kind: str) -> tuple[str, list[dict]]:
    """``script`` with the mistake ``kind`` (or ``end_early`` where the script has no write to get wrong):
    (the mistake made, the script)."""
    w = _first_write(env, script)
    if w is None or kind == "end_early":
        return "end_early", [{"role": "assistant", "content": CLOSING}]
    call = json.loads(json.dumps(script[w]["tool_calls"][0]))
    if kind == "skip_write":
        return kind, script[:w] + script[w + 1:]
    if kind == "malformed_write":
        call["function"]["arguments"] = call["function"]["arguments"][:-1] + ", "  # cut: no longer JSON
    else:
        args = json.loads(call["function"]["arguments"])
        key = next((k for k in sorted(args, key=lambda k: (not k.endswith("_id"), k))
                    if _wrong(args[k]) is not None), None)
        if key is None:
            return "skip_write", script[:w] + script[w + 1:]
        args[key] = _wrong(args[key])
        call["function"]["arguments"] = json.dumps(args)
    return kind, [*script[:w], {**script[w], "tool_calls": [call, *script[w]["tool_calls"][1:]]}, *script[w + 1:]]


def mistake_scripts(env: Domain, gold: dict[str, list[dict]]) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Each task's gold script with one mistake, the kinds taken in turn by the tasks with a write (the others
    end early): (scripts, task id -> the mistake)."""
    scripts, made, n = {}, {}, 0
    for task_id in sorted(gold):
        kind = MISTAKES[n % len(MISTAKES)]
        n += _first_write(env, gold[task_id]) is not None
        made[task_id], scripts[task_id] = mistaken(env, gold[task_id], kind)
    return scripts, made


def completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    return {"id": "cmpl-rl", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class ScriptServer(FakeLLMServer):
    """Answers turn k of a task's conversation with its script's k-th message (the model name picks the
    script set: ``policies[model][task_id]``), and with a goodbye after the script ends."""

    def __init__(self, rows: list[dict[str, Any]], policies: dict[str, dict[str, list[dict]]]):
        self.policies = policies
        self.task_of: dict[str, str] = {}
        for r in rows:
            self.task_of.setdefault(opening_key(r["prompt"]), r["task_id"])
        super().__init__(self.answer)

    def answer(self, request: Request) -> dict[str, Any]:
        body = request.body
        task_id = self.task_of[opening_key(body["messages"])]
        script = self.policies[body["model"]][task_id]
        k = sum(m["role"] == "assistant" for m in body["messages"])
        return completion(script[k] if k < len(script) else {"role": "assistant", "content": CLOSING},
                          body["model"])


def ambiguous(rows: list[dict[str, Any]], scripts: dict[str, list[dict]]) -> set[str]:
    """Tasks whose opening another task shares with a different script: the server cannot tell them apart."""
    by_key: dict[str, list[str]] = {}
    for r in rows:
        by_key.setdefault(opening_key(r["prompt"]), []).append(r["task_id"])
    return {t for ids in by_key.values() if len({json.dumps(scripts[i]) for i in ids}) > 1 for t in ids}
