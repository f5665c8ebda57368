"""A run's verified tasks as a multi-turn environment of the ``verifiers`` library (``evosyn[rl]``).

Built on its public classes: ``vf.MultiTurnEnv`` (the policy's turns come from the trainer or evaluator's model),
``vf.Rubric`` (our verifier as the reward function, each check a zero-weight metric). Each rollout holds an
``RLEpisode`` (``evosyn.agents.learners.rl_episode``) in its state: the task's own environment executes the
policy's tool calls, the task's embedded user answers its words, and the verifier judges the conversation when the
rollout ends. ``evosyn export --format verifiers`` writes a package whose ``load_environment`` builds one
(``evosyn.flows.rl_env``); this module takes resolved objects only.
"""
from __future__ import annotations

import json
import logging
from typing import Any

import verifiers as vf
from datasets import Dataset

from evosyn.agents.learners.rl_episode import CHECKS, RLEpisode
from evosyn.envs.base import Domain
from evosyn.storage.records import SynthTask

log = logging.getLogger("evosyn.rl")
STATE_KEY = "evosyn_episode"


def tool_defs(openai_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI ``tools`` entries (``{"type": "function", "function": {...}}``) in verifiers' form (the function)."""
    return [dict(t.get("function", t)) for t in openai_tools]


def dataset(rows: list[dict[str, Any]]) -> Dataset:
    """verifiers' dataset from rl-jsonl rows: ``prompt`` (chat messages), ``info`` (JSON text: the task and its
    tools; verifiers decodes it per rollout), ``answer`` empty (the verifier needs none). No ``task`` column and
    no ``info["task"]``: verifiers reads either as a task payload of its own."""
    return Dataset.from_list([{"prompt": r["prompt"], "answer": "",
                               "info": json.dumps({"task_id": r["task_id"], "evosyn_task": r["task"],
                                                   "tool_defs": tool_defs(r["tools"])})} for r in rows])


def _messages(chat: list[dict[str, Any]]) -> list[Any]:
    """The episode's chat messages (tool results, the user's turn) as verifiers' message types."""
    return [vf.ToolMessage(tool_call_id=m["tool_call_id"] or "", content=m["content"]) if m["role"] == "tool"
            else vf.UserMessage(content=m["content"] or "") for m in chat]


class EvosynEnv(vf.MultiTurnEnv):
    """The tasks of one domain, each rollout an ``RLEpisode`` in its task's environment."""

    def __init__(self, env: Domain, rows: list[dict[str, Any]], max_turns: int = 40, **kwargs: Any):
        self.domain = env
        data = dataset(rows)
        super().__init__(dataset=data, eval_dataset=data, rubric=rubric(), max_turns=max_turns, **kwargs)

    async def setup_state(self, state: vf.State) -> vf.State:
        info = state["info"]
        info = json.loads(info) if isinstance(info, str) else info
        episode = RLEpisode(SynthTask.model_validate(info["evosyn_task"]), self.domain, max_steps=self.max_turns)
        episode.opening()  # the user's opening: the row's prompt holds what it said
        state[STATE_KEY] = episode
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        episode: RLEpisode = state[STATE_KEY]
        if episode.done:  # ended with the opening (a user who says goodbye at once)
            state["final_env_response"] = []
            return []
        seen = _messages(episode.step(messages[-1]))
        if episode.done:
            state["final_env_response"] = seen
            return []
        return seen


def chat_client(base_url: str, api_key: str = "EMPTY") -> Any:
    """verifiers' chat-completions client for an OpenAI-compatible server, with one difference: an assistant
    message's ``reasoning_content`` is left out when it is empty. verifiers 0.3 always sends it, ``null`` when the
    model gave none, and llama.cpp's server refuses a null there (HTTP 500 "type must be string, but is null" from
    the second turn on); vLLM and OpenAI ignore its absence. Everything else goes as verifiers sends it."""
    from openai import AsyncOpenAI

    class Client(vf.OpenAIChatCompletionsClient):
        async def to_native_prompt(self, messages):
            native, extra = await super().to_native_prompt(messages)
            return [{k: v for k, v in m.items() if not (k == "reasoning_content" and v is None)}
                    for m in native], extra

    return Client(AsyncOpenAI(base_url=base_url, api_key=api_key))


def _check_metric(name: str):
    async def metric(state: vf.State) -> float:
        return _score(state).checks.get(name, 0.0)
    metric.__name__ = f"check_{name}"
    return metric


def _score(state: vf.State):
    """The verifier's score of the rollout, computed once (the reward and each metric read it)."""
    episode: RLEpisode | None = state.get(STATE_KEY)
    if "evosyn_score" not in state:
        if episode is None:  # the rollout failed before its episode began
            from evosyn.agents.learners.rl_episode import Score

            state["evosyn_score"] = Score(0.0, 0.0, {c: 0.0 for c in CHECKS}, "no episode (setup failed)")
        else:
            turns = state.get("trajectory") or []
            if not episode.done and episode.steps < len(turns) and turns[-1]["completion"]:
                # verifiers stops at max_turns right after the model's turn, without env_response: that turn is
                # the policy's too (its calls execute, the verifier judges it)
                episode.step(turns[-1]["completion"][-1])
            if not episode.termination:  # verifiers stopped it (its own turn limit, an error): tau2's max_steps
                episode.termination = "max_steps"
            state["evosyn_score"] = episode.score()
        s = state["evosyn_score"]
        if s.reward == 0.0 and s.reason:
            log.info("task %s: reward 0: %s", getattr(getattr(episode, "task", None), "task_id", "?"), s.reason)
    return state["evosyn_score"]


def rubric() -> vf.Rubric:
    """Reward: the verifier's 1/0; metrics: tau2's reward basis and each check, 1/0 (weight 0)."""
    async def evosyn_reward(state: vf.State) -> float:
        return _score(state).reward

    async def benchmark_reward(state: vf.State) -> float:
        return _score(state).benchmark_reward

    out = vf.Rubric(funcs=[evosyn_reward], weights=[1.0])
    out.add_metric(benchmark_reward)
    for name in CHECKS:
        out.add_metric(_check_metric(name))
    return out
