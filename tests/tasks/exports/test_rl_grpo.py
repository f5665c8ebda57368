"""TRL's GRPO trainer on an exported environment: our verifier's rewards reach the trainer (marker: train).

The unit tests read completions as the reward functions do (``evosyn.tasks.exports.grpo``); the train test runs two
GRPO steps of a tiny random model on CPU (``grpo_smoke.py``) in the RL environment: EVOSYN_RL_PYTHON, the python of
an environment with torch (CPU) and ``evosyn[rl]``. `.ci/run` builds it and sets EVOSYN_REQUIRE_TRAIN=1, so in CI a
missing one fails the test instead of skipping it. It learns nothing in two steps: it checks the wiring.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evosyn.agents.learners.rl_episode import score
from evosyn.envs.packs import get_domain
from evosyn.storage.records import Message, SynthTask, Trajectory

pytest.importorskip("verifiers")  # the [dev] extra
HERE = Path(__file__).parent
RUN = "synth-airline-s1-n6"


def evosyn(*args, home):
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "EVOSYN_HOME": str(home)}, timeout=300)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    home = tmp_path_factory.mktemp("rl") / "h"
    out = evosyn("synth", "--domain", "airline", "--n", "6", "--seed", "1", home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    out_dir = home.parent / "env"
    out = evosyn("export", "--run", RUN, "--format", "verifiers", "--output", str(out_dir), home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    return home, out_dir


def rows(out_dir: Path) -> dict[str, dict]:
    (jsonl,) = out_dir.glob("*/tasks.jsonl")
    return {r["task_id"]: r for r in map(json.loads, jsonl.read_text().splitlines())}


@pytest.fixture(scope="module")
def env(export):
    from evosyn.flows.rl_env import load_environment

    (jsonl,) = export[1].glob("*/tasks.jsonl")
    return load_environment(jsonl)


def test_a_completion_is_a_prompt_mode_call_or_words_to_the_user(env):
    from evosyn.tasks.exports.grpo import reply_message

    tools = json.loads(env.get_dataset()[0]["info"])["tool_defs"]
    call = reply_message('```json\n{"name": "get_user_details", "arguments": {"user_id": "u1"}}\n```', tools)
    assert call.content is None and [(c.name, c.arguments) for c in call.tool_calls] == [("get_user_details",
                                                                                           {"user_id": "u1"})]
    said = reply_message("Could you give me your user id?", tools)
    assert said.content == "Could you give me your user id?" and not said.tool_calls
    # not a call of an offered tool: words to the user, as the OpenAI-compatible agent keeps it after its re-asks
    wrong = reply_message('{"name": "book_a_spaceship", "arguments": {}}', tools)
    assert wrong.content == '{"name": "book_a_spaceship", "arguments": {}}' and not wrong.tool_calls


def test_the_reward_functions_score_each_completion_as_the_first_turn_of_its_task(env, export, tmp_path):
    from evosyn.tasks.exports.grpo import METRICS, first_turn, grpo_dataset, reward_funcs, reward_weights

    data = grpo_dataset(env)
    by_id = rows(export[1])
    assert len(data) == len(by_id) and all("# Tools" in p[0]["content"] for p in data["prompt"])
    funcs = reward_funcs(env, record=tmp_path / "r.jsonl")
    assert [f.__name__ for f in funcs] == ["evosyn_reward", *METRICS] and len(reward_weights()) == len(funcs)
    gold = {json.loads(i)["task_id"]: i for i in data["info"]}
    calls = {t: by_id[t]["task"]["tau2_task"]["evaluation_criteria"]["actions"][0] for t in gold
             if by_id[t]["task"]["tau2_task"]["evaluation_criteria"]["actions"]}
    assert calls
    # each task's gold first call (prompt mode), then words to the user for every task
    texts = [json.dumps({"name": c["name"], "arguments": c["arguments"]}) for c in calls.values()]
    texts += ["I am sorry, I cannot help with that."] * len(gold)
    info = [gold[t] for t in calls] + list(gold.values())
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    got = {f.__name__: f(prompts=None, completions=completions, info=info) for f in funcs}
    domain = get_domain("airline")
    for n, (text, inf) in enumerate(zip(texts, info, strict=True)):
        inf = json.loads(inf)
        task = SynthTask.model_validate(inf["evosyn_task"])
        episode = first_turn(task, domain, text, inf["tool_defs"])
        want = episode.score()
        assert got["evosyn_reward"][n] == want.reward
        assert {m: got[m][n] for m in METRICS} == want.metrics()
        if n < len(calls):  # the gold first call ran in the task's environment
            assert episode.messages[-1].role == "tool" and not episode.messages[-1].error
    assert len({tuple(got[m]) for m in METRICS}) > 2  # the checks tell these completions apart
    recorded = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [(r["call"], r["completion"]) for r in recorded] == [(1, t) for t in texts]
    # a metric asked without the reward before it scores the completion itself
    alone = reward_funcs(env)[-1]
    assert alone(prompts=None, completions=completions, info=info) == got[METRICS[-1]]


def rl_python() -> str:
    python = os.environ.get("EVOSYN_RL_PYTHON")
    if not python:
        if os.environ.get("EVOSYN_REQUIRE_TRAIN"):
            pytest.fail("EVOSYN_REQUIRE_TRAIN is set but EVOSYN_RL_PYTHON (torch + evosyn[rl]) is not")
        pytest.skip("EVOSYN_RL_PYTHON not set (the python of an environment with torch and evosyn[rl])")
    return python


@pytest.mark.train
@pytest.mark.timeout(300)
def test_two_grpo_steps_log_the_rewards_our_verifier_gives(export, tmp_path):
    python = rl_python()
    home, out_dir = export
    out = subprocess.run([python, str(HERE / "grpo_smoke.py"), str(out_dir), str(tmp_path / "grpo")],
                         capture_output=True, text=True, timeout=280,
                         env={**os.environ, "EVOSYN_HOME": str(home), "HF_HUB_OFFLINE": "1",
                              "TOKENIZERS_PARALLELISM": "false"})
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    result = json.loads((tmp_path / "grpo" / "result.json").read_text())
    assert result["global_step"] == 2
    steps = [h for h in result["log_history"] if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2]

    from evosyn.tasks.exports.grpo import METRICS

    recorded = [json.loads(line) for line in (tmp_path / "grpo" / "rewards.jsonl").read_text().splitlines()]
    assert sorted({r["call"] for r in recorded}) == [1, 2]  # one batch of completions scored per step
    by_id, domain = rows(out_dir), get_domain("airline")
    for r in recorded:  # each reward, recomputed here by the verifier on the conversation the trainer's turn made
        task = SynthTask.model_validate(by_id[r["task_id"]]["task"])
        trajectory = Trajectory(run_id=task.run_id, round=task.round, space_version=task.space_version,
                                direction_id=task.direction_id, blueprint_id=task.blueprint_id,
                                trajectory_id=f"rl-{task.task_id}", task_id=task.task_id, producer="learner",
                                messages=[Message.model_validate(m) for m in r["messages"]], termination="max_steps")
        assert r["messages"][1]["role"] == "assistant"  # the policy's turn after the user's opening
        s = score(task, trajectory, domain)
        assert (s.reward, s.metrics()) == (r["reward"], r["metrics"])
    for h, call in zip(steps, (1, 2), strict=True):  # what TRL logged is the mean of what our verifier gave that step's batch
        batch = [r for r in recorded if r["call"] == call]
        assert len(batch) == 4
        assert h["rewards/evosyn_reward/mean"] == pytest.approx(sum(r["reward"] for r in batch) / 4, abs=1e-6)
        for m in METRICS:
            assert h[f"rewards/{m}/mean"] == pytest.approx(sum(r["metrics"][m] for r in batch) / 4, abs=1e-6), m
    print(f"\ngrpo smoke: {result['seconds']:.1f}s in the RL environment")
