"""A task agent served behind an OpenAI-compatible API with tool calling (vLLM, `llamafactory-cli api`).

<<<<<<< HEAD
``tool_calls="prompt"`` serves a model whose chat template has no tool calling (a
small GGUF on llama.cpp): the tools go in the system prompt and the call comes
back as JSON in the reply text, validated by ``agents.llm.prompt_tools``. An
invalid call is kept in ``rejected`` (reason and raw reply) and asked again with
the problem shown, at most ``retries`` times; after that the reply stands as a
plain message (so the episode goes on and the verifier scores it).
=======
Its requests carry the conversation as the exports write it for training
(``exports.agent_turns``): the policy as the system prompt, alternating turns,
the results of parallel calls as one tool message (``llamafactory-cli api``
accepts only strictly alternating user / assistant messages; a qwen template
renders the joined results as it renders separate ones). Parallel tool calls
in a reply are all kept.
>>>>>>> i16-lf
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
                 max_tokens: int = 1024, timeout: float = 120.0, tool_calls: str = "native", retries: int = 2,
                 seed: int | None = None):
        from openai import OpenAI

        from agents.llm.prompt_tools import MODES

        if tool_calls not in MODES:
            raise ValueError(f"tool_calls: {tool_calls!r} is not one of {', '.join(MODES)}")
        self.tool_calls, self.retries, self.seed = tool_calls, retries, seed
        self.rejected: list[tuple[str, str]] = []  # (reason, raw reply) of each invalid prompt-mode call

        key = os.environ.get(api_key_env, "") if api_key_env else "EMPTY"
        self.client = OpenAI(base_url=base_url, api_key=key or "EMPTY", timeout=timeout, max_retries=2)
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.tools: list[dict[str, Any]] = []
        self.system = ""

    def reset(self, tools: list[dict[str, Any]], policy: str) -> None:
        self.tools, self.system = tools, policy

    def act(self, messages: list[Message]) -> Message:
        if self.tool_calls == "prompt" and self.tools:
            return self._act_prompted(messages)
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

    def _act_prompted(self, messages: list[Message]) -> Message:
        from agents.llm.prompt_tools import parse_tool_reply, prompt_messages
        from agents.llm.types import LLMOutputError

        base = prompt_messages(to_openai(messages, self.system), self.tools)
        convo, text = base, ""
        extra = {"seed": self.seed} if self.seed is not None else {}
        for _ in range(self.retries + 1):
            resp = self.client.chat.completions.create(model=self.model, messages=convo, temperature=self.temperature,
                                                       max_tokens=self.max_tokens, **extra)
            text = resp.choices[0].message.content or ""
            try:
                text, calls = parse_tool_reply(text, self.tools)
            except LLMOutputError as exc:
                self.rejected.append((str(exc), text))
                convo = [*base, {"role": "assistant", "content": text},
                         {"role": "user", "content": f"(note from the system: that tool call could not be used: "
                                                     f"{exc}. Reply again.)"}]
                continue
            if calls:
                return Message(role="assistant", content=None, tool_calls=[
                    ToolCall(id=calls[0].id, name=calls[0].name, arguments=calls[0].arguments)])
            return Message(role="assistant", content=text)
        return Message(role="assistant", content=text)
