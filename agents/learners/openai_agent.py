"""A task agent served behind an OpenAI-compatible API with tool calling (vLLM, `llamafactory-cli api`).

Its requests carry the conversation as the exports write it for training
(``exports.agent_turns``): the policy as the system prompt, alternating turns,
the results of parallel calls as one tool message (``llamafactory-cli api``
accepts only strictly alternating user / assistant messages; a qwen template
renders the joined results as it renders separate ones). Parallel tool calls
in a reply are all kept.
"""
from __future__ import annotations

import json
import os
from typing import Any

from agents.learners.exports import agent_turns, openai_turns
from storage.records import Message, ToolCall


def to_openai(messages: list[Message], system: str) -> list[dict[str, Any]]:
    return openai_turns(agent_turns(messages, complete=False), system, merge_results=True)


class OpenAICompatibleAgent:
    name = "openai_compatible"

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 1024, timeout: float = 120.0):
        from openai import OpenAI

        key = os.environ.get(api_key_env, "") if api_key_env else "EMPTY"
        self.client = OpenAI(base_url=base_url, api_key=key or "EMPTY", timeout=timeout, max_retries=2)
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.tools: list[dict[str, Any]] = []
        self.system = ""

    def reset(self, tools: list[dict[str, Any]], policy: str) -> None:
        self.tools, self.system = tools, policy

    def act(self, messages: list[Message]) -> Message:
        resp = self.client.chat.completions.create(
            model=self.model, messages=to_openai(messages, self.system), tools=self.tools or None,
            temperature=self.temperature, max_tokens=self.max_tokens)
        msg = resp.choices[0].message
        if msg.tool_calls:
            calls = []
            for n, tc in enumerate(msg.tool_calls):
                try:
                    args = json.loads(tc.function.arguments or "{}")
                except json.JSONDecodeError:
                    args = {"_unparsed": tc.function.arguments}  # the verifier's executable check will say why
                calls.append(ToolCall(id=tc.id or f"call_{n}", name=tc.function.name,
                                      arguments=args if isinstance(args, dict) else {"_unparsed": args}))
            return Message(role="assistant", content=msg.content or None, tool_calls=calls)
        return Message(role="assistant", content=msg.content or "")
