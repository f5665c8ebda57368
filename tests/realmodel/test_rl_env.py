"""The exported RL environment evaluates the real model (SmolLM2-135M on llama.cpp, 127.0.0.1) with verifiers' API.

`evosyn export --format verifiers` of a few synthesized airline tasks, loaded with the exported package's
``load_environment``, and evaluated by verifiers' own ``evaluate`` through the suite's llama-server (the tools go in
the request's ``tools`` field; the model's reply is the policy's turn, whatever it says). Every rollout must finish
with reward 0 or 1 and the verifier's metrics, and its reward must be the verifier's score of the same conversation,
replayed here in a fresh episode of its task from the rollout's own assistant turns.
"""
from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]
RUN, MAX_TURNS = "synth-airline-s1-n6", 3


def evosyn(*args, home):
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "EVOSYN_HOME": str(home)}, timeout=300)


def replay(task, domain, completion):
    """A fresh episode of ``task`` fed the rollout's assistant turns in order: (its score, what the policy saw)."""
    from evosyn.agents.learners.rl_episode import RLEpisode

    episode = RLEpisode(task, domain, max_steps=MAX_TURNS)
    episode.opening()
    seen = []
    for m in completion:
        m = m if isinstance(m, dict) else m.model_dump()
        if m["role"] == "assistant" and not episode.done:
            seen.extend(episode.step(m))
    if not episode.termination:
        episode.termination = "max_steps"
    return episode.score(), seen


def llama_server_client(base_url: str):
    """The product's client for such servers (``verifiers_env.chat_client``: no null ``reasoning_content``, which
    llama-server refuses from the second turn on)."""
    from evosyn.tasks.exports.verifiers_env import chat_client

    return chat_client(base_url)


@pytest.mark.timeout(420)
def test_verifiers_evaluates_the_real_model_in_the_exported_environment(real_model, tmp_path, monkeypatch):
    pytest.importorskip("verifiers")
    from evosyn.agents.learners.rl_episode import CHECKS
    from evosyn.envs.packs import get_domain
    from evosyn.storage.records import SynthTask

    home = tmp_path / "h"
    out = evosyn("synth", "--domain", "airline", "--n", "6", "--seed", "1", home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    out = evosyn("export", "--run", RUN, "--format", "verifiers", "--output", str(tmp_path / "env"), home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    (jsonl,) = (tmp_path / "env").glob("*/tasks.jsonl")
    monkeypatch.syspath_prepend(str(tmp_path / "env"))
    env = importlib.import_module(jsonl.parent.name).load_environment(max_turns=MAX_TURNS)

    client = llama_server_client(real_model.base_url)
    t0 = time.perf_counter()
    results = asyncio.run(env.evaluate(client=client, model=real_model.model, num_examples=3,
                                       sampling_args={"max_tokens": 64, "temperature": 0.0}, max_concurrent=1,
                                       on_progress=lambda *a, **k: None))
    took = time.perf_counter() - t0
    outputs = results["outputs"]
    assert len(outputs) == 3
    domain, stopped = get_domain("airline"), []
    for o in outputs:
        assert o.get("error") is None, o.get("error")
        assert o["reward"] in (0.0, 1.0)
        metrics = o["metrics"]  # the verifier's, and verifiers' own (num_turns)
        ours = {k: metrics[k] for k in ("benchmark_reward", *(f"check_{c}" for c in CHECKS))}
        assert all(v in (0.0, 1.0) for v in ours.values()) and metrics["evosyn_reward"] == o["reward"]
        said = [m for m in o["completion"] if (m if isinstance(m, dict) else m.model_dump())["role"] == "assistant"]
        assert 1 <= len(said) <= MAX_TURNS  # the model answered, within the turn limit
        info = o["info"] if isinstance(o["info"], dict) else json.loads(o["info"])
        task = SynthTask.model_validate(info["evosyn_task"])
        want, seen = replay(task, domain, o["completion"])
        assert (o["reward"], ours) == (want.reward, want.metrics()), want.reason
        # the environment's answers in the rollout are the replay's (the same episode, deterministically); a
        # rollout that verifiers stopped at max_turns shows no answer to its last turn, which was judged all the same
        answers = [m if isinstance(m, dict) else m.model_dump() for m in o["completion"]]
        answers = [m.get("content") for m in answers if m["role"] != "assistant"]
        assert answers == [m["content"] for m in seen][:len(answers)] and len(seen) >= len(answers)
        stopped.append(o.get("stop_condition"))
    print(f"\nrealmodel RL env: {took:.1f}s for {len(outputs)} rollouts, rewards "
          f"{[o['reward'] for o in outputs]}, turns {[o['metrics'].get('num_turns') for o in outputs]}, stopped by "
          f"{stopped}")
