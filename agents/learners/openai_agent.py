"""A task agent served behind an OpenAI-compatible API with tool calling (vLLM, `llamafactory-cli api`).

An adapter on the project's one LLM client (``evosyn.agents.llm.LLMClient``: its aiohttp transport,
retries with ``retry-after``, per-model limits), not a client of its own. It reads the reply as
the server sent it (``LLMClient.reply_sync``) rather than through ``chat``'s strict interpretation:
the agent is what is being evaluated, so a tool call with malformed arguments stays a call (the
verifier's executable check says why it fails) and a truncated turn is still a turn. Nothing is
cached: each trial asks the served model afresh.

Its requests carry the conversation as the exports write it for training
(``exports.agent_turns``): the policy as the system prompt, alternating turns,
the results of parallel calls as one tool message (``llamafactory-cli api``
accepts only strictly alternating user / assistant messages; a qwen template
renders the joined results as it renders separate ones). Parallel tool calls
in a reply are all kept.

``tool_calls="prompt"`` serves a model whose chat template has no tool calling (a
small GGUF on llama.cpp): the tools go in the system prompt and the call comes
back as JSON in the reply text, validated by ``evosyn.agents.llm.prompt_tools``. An
invalid call is kept in ``rejected`` (reason and raw reply) and asked again with
the problem shown, at most ``retries`` times; after that the reply stands as a
plain message (so the episode goes on and the verifier scores it).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evosyn.agents.learners.exports import agent_turns, openai_turns
from evosyn.agents.llm.client import LLMClient
from evosyn.agents.llm.prompt_tools import MODES, parse_tool_reply, prompt_messages
from evosyn.agents.llm.providers import OpenAIProvider
from evosyn.agents.llm.types import LLMOutputError
from evosyn.storage.records import Message, ToolCall


def to_openai(messages: list[Message], system: str) -> list[dict[str, Any]]:
    return openai_turns(agent_turns(messages, complete=False), system, merge_results=True)


class OpenAICompatibleAgent:
    name = "openai_compatible"

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 1024, timeout: float = 120.0, tool_calls: str = "native", retries: int = 2,
                 seed: int | None = None, cache_dir: Path | None = None, max_concurrency: int = 8,
                 rpm: int | None = None, price: tuple[float, float] | None = None, keep_calls: bool = False,
                 provider: str = "openai_compatible"):
        """``cache_dir``, ``keep_calls``: a learner evaluated in a run (``learner: served``) has its replies cached
        (a resumed round re-sends none) and its calls kept in ``client.log`` for the ``llm_calls`` table; an
        evaluation of its own (``evosyn evaluate --official``) asks afresh and keeps none."""
        if tool_calls not in MODES:
            raise ValueError(f"tool_calls: {tool_calls!r} is not one of {', '.join(MODES)}")
        self.tool_calls, self.retries, self.seed = tool_calls, retries, seed
        self.rejected: list[tuple[str, str]] = []  # (reason, raw reply) of each invalid prompt-mode call

        key = (os.environ.get(api_key_env, "") if api_key_env else "") or "EMPTY"  # local servers take any key
        # two transport retries, as the agent had before; a served model is self-hosted: no price
        self.client = LLMClient("agent", OpenAIProvider(provider, base_url, key, timeout), model=model,
                                base_url=base_url, temperature=temperature, max_tokens=max_tokens, max_retries=2,
                                secrets=(key,), backoff_initial_s=0.5, backoff_max_s=8.0, cache_dir=cache_dir,
                                max_concurrency=max_concurrency, rpm=rpm, price=price)
        self.keep_calls = keep_calls
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.tools: list[dict[str, Any]] = []
        self.system = ""

    def reset(self, tools: list[dict[str, Any]], policy: str) -> None:
        self.tools, self.system = tools, policy

    def close(self) -> None:
        """Release the client (its I/O thread and connections): a served model outlives no evaluation."""
        self.client.close()

    def _ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
             extra: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.client.reply_sync(messages, tools=tools, extra=extra)
        if not self.keep_calls:  # an evaluation of its own records the trajectory only: nothing piles up
            self.client.log.take()
        return reply

    def act(self, messages: list[Message]) -> Message:
        if self.tool_calls == "prompt" and self.tools:
            return self._act_prompted(messages)
        # the served model may answer with several calls at once (the exports keep them): let it
        extra = {"parallel_tool_calls": True} if self.tools else {}
        if self.seed is not None:  # a trial of several (pass@k): its own sample, its own cache entry
            extra["seed"] = self.seed
        reply = self._ask(to_openai(messages, self.system), self.tools or None, extra or None)
        if reply["tool_calls"]:
            calls = []
            for n, tc in enumerate(reply["tool_calls"]):
                try:
                    args = json.loads(tc["arguments"] or "{}")
                except json.JSONDecodeError:
                    args = {"_unparsed": tc["arguments"]}  # the verifier's executable check will say why
                calls.append(ToolCall(id=tc["id"] or f"call_{n}", name=tc["name"],
                                      arguments=args if isinstance(args, dict) else {"_unparsed": args}))
            return Message(role="assistant", content=reply["text"] or None, tool_calls=calls)
        return Message(role="assistant", content=reply["text"])

    def _act_prompted(self, messages: list[Message]) -> Message:
        base = prompt_messages(to_openai(messages, self.system), self.tools)
        convo, text = base, ""
        extra = {"seed": self.seed} if self.seed is not None else None
        for _ in range(self.retries + 1):
            text = self._ask(convo, None, extra)["text"]
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
