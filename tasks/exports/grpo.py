"""An exported RL environment's rewards as TRL ``GRPOTrainer`` reward functions (``evosyn[rl]``), single-turn.

TRL's GRPO trainer generates one completion per prompt and asks reward functions to score it; it runs no
environment between turns. ``reward_funcs(env)`` scores each completion as the policy's first turn of its task's
episode (``RLEpisode`` with a budget of one turn): a completion that is a tool call in prompt mode (one JSON object
``{"name", "arguments"}``, a ```json fence or ``<tool_call>`` tags, as ``evosyn.agents.llm.prompt_tools`` reads it)
executes in the task's environment, any other text goes to the task's user; then the verifier judges the
conversation (``score``). The first function is the reward (``evosyn_reward``, 1/0); the others are tau2's reward
basis and each check, for ``GRPOConfig(reward_weights=reward_weights())`` to weigh 0 so TRL logs them
(``rewards/<name>/mean``) without training on them. One turn of a multi-turn task almost never earns reward 1: this
wires our verifier into a trainer (the smoke test, a first-turn curriculum); multi-turn RL runs the exported
environment through a trainer that drives ``verifiers`` environments (docs: RL environments).

``grpo_dataset(env)`` is the environment's dataset with the tools described in the prompt (a policy without a chat
template for tools sees them, as the realmodel suite's SmolLM2 does) and ``info`` (the task) kept as a column, which
TRL hands to the reward functions. ``record=PATH`` appends one JSON line per scored completion (the trainer's call,
the task, the completion, the conversation and its score) to check or inspect what the trainer was given.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset

from evosyn.agents.learners.rl_episode import CHECKS, RLEpisode, Score
from evosyn.agents.llm.prompt_tools import parse_tool_reply, prompt_messages
from evosyn.agents.llm.types import LLMOutputError
from evosyn.envs.base import Domain
from evosyn.storage.records import Message, SynthTask, ToolCall

if TYPE_CHECKING:
    from evosyn.tasks.exports.verifiers_env import EvosynEnv

METRICS = ("benchmark_reward", *(f"check_{c}" for c in CHECKS))


def _info(info: Any) -> dict[str, Any]:
    return json.loads(info) if isinstance(info, str) else info


def grpo_dataset(env: EvosynEnv) -> Dataset:
    """The ``EvosynEnv``'s dataset as TRL's: ``prompt`` (the tools described in the system message, the reminder
    of the call format on the user's opening) and ``info`` (the task and its tools, for the reward functions)."""
    rows = env.get_dataset()
    return Dataset.from_list([{"prompt": prompt_messages(list(r["prompt"]), _info(r["info"])["tool_defs"]),
                               "info": r["info"]} for r in rows])


def reply_message(text: str, tools: list[dict[str, Any]]) -> Message:
    """The policy's completion as its turn: a valid prompt-mode call of an offered tool, else a message to the user
    (as the project's OpenAI-compatible agent takes a reply once its re-asks are spent)."""
    try:
        said, calls = parse_tool_reply(text, tools)
    except LLMOutputError:
        return Message(role="assistant", content=text or None)
    if calls:
        return Message(role="assistant", content=None,
                       tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls])
    return Message(role="assistant", content=said or None)


def completion_text(completion: Any) -> str:
    """TRL's completion: text, or conversational (a list of messages: the assistant's content)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant")


def first_turn(task: SynthTask, env: Domain, text: str, tools: list[dict[str, Any]]) -> RLEpisode:
    """The task's episode with ``text`` as the policy's one turn (the episode ends with it: ``max_steps``)."""
    episode = RLEpisode(task, env, max_steps=1)
    episode.opening()
    if not episode.done:  # a user who ended the conversation in their opening leaves the policy no turn
        episode.step(reply_message(text, tools))
    return episode


def reward_weights() -> list[float]:
    """``GRPOConfig.reward_weights`` for ``reward_funcs``: the reward 1, the logged metrics 0."""
    return [1.0] + [0.0] * len(METRICS)


def reward_funcs(env: EvosynEnv, record: str | Path | None = None) -> list[Callable[..., list[float]]]:
    """TRL reward functions over an ``EvosynEnv`` (its ``domain``, the rows' ``info``): ``evosyn_reward``, then
    ``benchmark_reward`` and ``check_<name>`` per check. The reward scores a batch once; the metrics read that."""
    domain = env.domain
    scored: dict[tuple[str, str], Score] = {}
    calls = {"n": 0}
    path = Path(record) if record is not None else None

    def score_one(info: Any, text: str) -> tuple[Score, RLEpisode | None, dict[str, Any]]:
        info = _info(info)
        task = SynthTask.model_validate(info["evosyn_task"])
        episode = first_turn(task, domain, text, info["tool_defs"])
        return episode.score(), episode, info

    def lookup(info: Any, text: str) -> Score:
        key = (info if isinstance(info, str) else json.dumps(info, sort_keys=True), text)
        if key not in scored:  # a metric called without the reward before it (another order of the functions)
            scored[key] = score_one(info, text)[0]
        return scored[key]

    def evosyn_reward(prompts, completions, info, **_: Any) -> list[float]:
        scored.clear()  # a new batch
        calls["n"] += 1
        out, lines = [], []
        for completion, inf in zip(completions, info, strict=True):
            text = completion_text(completion)
            s, episode, parsed = score_one(inf, text)
            scored[(inf if isinstance(inf, str) else json.dumps(inf, sort_keys=True), text)] = s
            out.append(s.reward)
            if path is not None:
                lines.append(json.dumps({
                    "call": calls["n"], "task_id": parsed["task_id"], "completion": text, "reward": s.reward,
                    "metrics": s.metrics(), "reason": s.reason,
                    "messages": [m.model_dump(mode="json") for m in episode.messages]}) + "\n")
        if path is not None:
            with path.open("a") as f:
                f.writelines(lines)
        return out

    def metric(name: str) -> Callable[..., list[float]]:
        def func(prompts, completions, info, **_: Any) -> list[float]:
            return [lookup(inf, completion_text(c)).metrics()[name] for c, inf in zip(completions, info, strict=True)]
        func.__name__ = name  # TRL logs rewards/<__name__>/mean
        return func

    return [evosyn_reward, *(metric(m) for m in METRICS)]
