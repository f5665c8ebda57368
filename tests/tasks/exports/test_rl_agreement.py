"""The exported RL environments' rewards agree with ``evosyn verify`` (issue 57's acceptance).

verifiers' own evaluation API runs the exported environment (``load_environment`` of the rl-jsonl rows, as the
exported package calls it) against a scripted OpenAI-compatible server on 127.0.0.1 (tests/rl_servers.py): one
that replays each task's kept teacher trajectory, one that makes a known mistake per task. Each rollout's
conversation is then rebuilt from verifiers' output alone (its completion's assistant turns, played again in a
fresh episode of the task, which must show exactly the completion's tool results and user turns) and judged by
``score`` and by the CLI, ``evosyn verify --task tasks.json --task-id ID --trajectory T.json --format json``: the
rollout's reward and every check must equal what the CLI reports, for every rollout.

The full check (``-m slow``) covers 50 tasks of every family, the example pack of the docs among them; the fast
loop covers 5 airline tasks.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

vf = pytest.importorskip("verifiers")

from click.testing import CliRunner
from evosyn.agents.designer import ColdStart
from evosyn.agents.learners.rl_episode import RLEpisode, score
from evosyn.envs.base import Domain
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_domain
from evosyn.storage.records import SynthTask
from evosyn.storage.store import Store
from evosyn.tasks.exports.hf import select_examples
from evosyn.tasks.exports.rl import rl_rows, write_rl_jsonl
from evosyn.tasks.stages import Ctx
from evosyn.tasks.synthesis import run_pass
from openai import AsyncOpenAI

from tests.fakes.user_packs import user_registry  # noqa: F401
from tests.rl_servers import (
    ScriptServer,
    ambiguous,
    gold_scripts,
    mistake_scripts,
    teacher_turns,
)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "docs" / "examples"  # the docs' example pack (``library``), a user pack folder
MAX_TURNS = 40
CLI_SUBPROCESS_SAMPLE = 2  # rollouts per family also judged by the installed `evosyn` in a process of its own


# ------------------------------------------------------------------ tasks, export, evaluation
def synthesized(root: Path, env: Domain, n: int, seed: int = 0) -> tuple[Store, str, list[dict[str, Any]]]:
    """A synthesis pass's verified tasks (no diagnostic share: every one exported) as rl-jsonl rows, at least
    ``n`` of them."""
    store, run_id = Store(root), f"rl-{env.name}-s{seed}"
    ctx = Ctx(store, run_id, 0, seed, env, diagnostic_fraction=0.0)
    run_pass(ctx, load_initial_space(env.pack, run_id=run_id), ColdStart(), n + max(4, n // 5))
    rows = rl_rows(store, run_id, env).rows
    assert len(rows) >= n, f"{env.name}: only {len(rows)} verified tasks"
    return store, run_id, rows


def evaluate(env: Any, base_url: str, model: str) -> list[dict[str, Any]]:
    """verifiers' evaluation of every task of ``env`` with ``model`` of the server at ``base_url``."""
    async def run():
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=base_url, api_key="EMPTY"))
        return await env.evaluate(client=client, model=model, num_examples=-1, rollouts_per_example=1,
                                  max_concurrent=8)
    return asyncio.run(run())["outputs"]


def _plain(m: Any) -> dict[str, Any]:
    return m if isinstance(m, dict) else m.model_dump()


def _info(output: dict[str, Any]) -> dict[str, Any]:
    info = output["info"]
    return json.loads(info) if isinstance(info, str) else info


def rebuilt(task: SynthTask, env: Domain, output: dict[str, Any]) -> RLEpisode:
    """The rollout's conversation from verifiers' output alone: its assistant turns played again in a fresh
    episode, which must show the policy what the output shows (the prompt, each tool result and user turn)."""
    episode = RLEpisode(task, env, max_steps=MAX_TURNS)
    seen = [(m["role"], m["content"]) for m in episode.opening()]
    assert seen == [(_plain(m)["role"], _plain(m)["content"]) for m in output["prompt"]], task.task_id
    completion = [_plain(m) for m in output["completion"]]
    shown: list[tuple[str, str]] = []
    expected: list[tuple[str, str]] = []
    last: list[tuple[str, str]] = []
    for m in completion:
        if m["role"] == "assistant":
            assert not episode.done, f"{task.task_id}: a policy turn after the episode ended"
            last = [(x["role"], x["content"]) for x in episode.step(m)]
            expected += last
        else:
            shown.append((m["role"], m["content"] or ""))
    if output.get("stop_condition") == "max_turns_reached" and last:  # cut after the model's turn: its results
        expected = expected[:len(expected) - len(last)]  # executed (the verifier judges them) but are not shown
    assert shown == expected, task.task_id
    if not episode.termination:  # verifiers' turn limit: as the environment ends it
        episode.termination = "max_steps"
    return episode


def cli_verify(home: Path, domain: str, tasks_json: Path, task_id: str, trajectory: Path,
               subprocess_env: dict[str, str] | None = None) -> dict[str, Any]:
    """``evosyn verify --format json``'s verdict: in this process (CliRunner), or by the installed console script
    in a process of its own (``subprocess_env``)."""
    args = ["--home", str(home), "verify", "--domain", domain, "--task", str(tasks_json), "--task-id", task_id,
            "--trajectory", str(trajectory), "--format", "json"]
    if subprocess_env is not None:
        done = subprocess.run([str(Path(sys.executable).parent / "evosyn"), *args], capture_output=True, text=True,
                              env=subprocess_env, timeout=300, check=False)
        code, out = done.returncode, done.stdout
    else:
        from evosyn.flows.cli import main

        result = CliRunner().invoke(main, args)
        code, out = result.exit_code, result.output
    assert code in (0, 1), out
    verdict = json.loads(out[out.index("{"):])
    assert (code == 0) == verdict["passed"]
    return verdict


@dataclass
class Agreement:
    rollouts: int = 0
    reward_1: int = 0
    agree_score: int = 0
    agree_cli: int = 0
    cli_subprocess: int = 0
    rewards: dict[str, float] = field(default_factory=dict)


def check_agreement(outputs: list[dict[str, Any]], tasks: dict[str, SynthTask], env: Domain, home: Path,
                    tasks_json: Path, subprocess_env: dict[str, str] | None = None) -> Agreement:
    """Every rollout's reward and checks equal ``score``'s and ``evosyn verify``'s on its rebuilt trajectory."""
    got = Agreement()
    for n, out in enumerate(sorted(outputs, key=lambda o: _info(o)["task_id"])):
        task_id = _info(out)["task_id"]
        assert not out.get("error"), (task_id, out.get("error"))
        episode = rebuilt(tasks[task_id], env, out)
        trajectory = episode.trajectory()
        mine = score(tasks[task_id], trajectory, env)
        metrics = out["metrics"]
        assert out["reward"] == mine.reward and metrics["benchmark_reward"] == mine.benchmark_reward, task_id
        assert {k: metrics[f"check_{k}"] for k in mine.checks} == mine.checks, task_id
        got.agree_score += 1
        path = home / "trajectories" / f"{task_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"messages": [m.model_dump(mode="json") for m in trajectory.messages],
                                    "termination": trajectory.termination}))
        cli = cli_verify(home, env.name, tasks_json, task_id, path)
        assert out["reward"] == float(cli["passed"]), (task_id, out["reward"], cli)
        assert metrics["benchmark_reward"] == cli["reward"], (task_id, metrics, cli)
        assert {c["name"]: float(c["passed"] or c["skipped"]) for c in cli["checks"]} == mine.checks, task_id
        got.agree_cli += 1
        if subprocess_env is not None and n < CLI_SUBPROCESS_SAMPLE:
            assert cli_verify(home, env.name, tasks_json, task_id, path, subprocess_env)["passed"] == cli["passed"]
            got.cli_subprocess += 1
        got.rollouts += 1
        got.reward_1 += out["reward"] == 1.0
        got.rewards[task_id] = out["reward"]
    return got


def agreement_run(tmp: Path, env: Domain, n: int, subprocess_env: dict[str, str] | None = None,
                  max_turns: int = MAX_TURNS) -> tuple[Agreement, Agreement, dict[str, str]]:
    """Synthesize, export ``n`` tasks, evaluate them with the gold and the mistakes server, check agreement:
    (gold, mistakes, task id -> the mistake made)."""
    from evosyn.flows.rl_env import load_environment

    store, run_id, rows = synthesized(tmp / "home", env, n)
    gold = gold_scripts(rows, teacher_turns(store, run_id))
    rows = [r for r in rows if r["task_id"] not in ambiguous(rows, gold)][:n]
    assert len(rows) == n, f"{env.name}: {len(rows)} tasks the server tells apart"
    write_rl_jsonl(rows, tmp / "export")
    loaded = load_environment(tmp / "export" / "tasks.jsonl", max_turns=max_turns)
    assert len(loaded.eval_dataset) == n
    wrong, made = mistake_scripts(env, {r["task_id"]: gold[r["task_id"]] for r in rows})
    tasks = {r["task_id"]: SynthTask.model_validate(r["task"]) for r in rows}
    with ScriptServer(rows, {"gold": gold, "mistakes": wrong}) as server:
        outputs = {model: evaluate(loaded, server.base_url, model) for model in ("gold", "mistakes")}
    results = tuple(check_agreement(outputs[m], tasks, env, tmp / "home", tmp / "export" / "tasks.json",
                                    subprocess_env) for m in ("gold", "mistakes"))
    return results[0], results[1], made


def report(family: str, gold: Agreement, wrong: Agreement, made: dict[str, str], seconds: float) -> None:
    kinds: dict[str, list[int]] = {}
    for task_id, kind in made.items():
        kinds.setdefault(kind, [0, 0])[0] += 1
        kinds[kind][1] += wrong.rewards[task_id] == 0.0
    print(f"\n[rl-agreement] {family}: {gold.rollouts} tasks; gold replay reward 1: {gold.reward_1}/{gold.rollouts}"
          f" ({gold.reward_1 / gold.rollouts:.0%}); mistakes reward 0: "
          f"{wrong.rollouts - wrong.reward_1}/{wrong.rollouts} "
          f"({', '.join(f'{k} {z}/{t}' for k, (t, z) in sorted(kinds.items()))}); agreement with score "
          f"{gold.agree_score + wrong.agree_score}/{gold.rollouts + wrong.rollouts}, with `evosyn verify` "
          f"{gold.agree_cli + wrong.agree_cli}/{gold.rollouts + wrong.rollouts} "
          f"({gold.cli_subprocess + wrong.cli_subprocess} by the console script); {seconds:.0f}s")


def assert_outcomes(gold: Agreement, wrong: Agreement, made: dict[str, str], n: int) -> None:
    assert gold.rollouts == wrong.rollouts == n and gold.agree_cli == wrong.agree_cli == n
    assert gold.reward_1 >= 0.9 * n, f"gold replay reward 1 on only {gold.reward_1}/{n}"
    written = [t for t, kind in made.items() if kind != "end_early"]  # a write got wrong or left out
    assert [t for t in written if wrong.rewards[t] != 0.0] == []
    assert wrong.reward_1 <= 0.1 * n


# ------------------------------------------------------------------ the tests
def test_five_airline_rollouts_get_the_reward_evosyn_verify_gives(tmp_path):
    start = time.perf_counter()
    gold, wrong, made = agreement_run(tmp_path, get_domain("airline"), 5)
    report("airline (fast)", gold, wrong, made, time.perf_counter() - start)
    assert_outcomes(gold, wrong, made, 5)
    assert set(made.values()) >= {"wrong_argument", "skip_write", "malformed_write"}


def test_a_rollout_cut_at_max_turns_is_judged_with_its_last_turn(tmp_path):
    """verifiers stops a rollout at max_turns right after the model's turn, without an environment response: that
    turn's calls still execute and the verifier judges the conversation with it (the rebuilt trajectory holds every
    assistant turn of the completion, and the rewards agree)."""
    gold, wrong, _ = agreement_run(tmp_path, get_domain("airline"), 5, max_turns=2)
    assert gold.agree_cli == wrong.agree_cli == 5
    assert gold.reward_1 == 0  # two turns solve no task: the cut is real


@pytest.mark.slow
@pytest.mark.parametrize("family", ["airline", "retail", "telecom", "car_bench"])
def test_fifty_rollouts_per_family_get_the_reward_evosyn_verify_gives(family, tmp_path):
    start = time.perf_counter()
    env = {**os.environ, "EVOSYN_HOME": str(tmp_path / "home")}
    gold, wrong, made = agreement_run(tmp_path, get_domain(family), 50, subprocess_env=env)
    report(family, gold, wrong, made, time.perf_counter() - start)
    assert_outcomes(gold, wrong, made, 50)


@pytest.mark.slow
def test_fifty_rollouts_of_the_docs_example_pack_get_the_reward_evosyn_verify_gives(tmp_path, user_registry):  # noqa: F811
    from evosyn.flows.compile import compile_domain

    user_registry(EXAMPLES)  # loaded as a user's pack: from the EVOSYN_DOMAINS folder
    start = time.perf_counter()
    env = compile_domain("library", "domain").env
    sub = {**os.environ, "EVOSYN_HOME": str(tmp_path / "home"), "EVOSYN_DOMAINS": str(EXAMPLES)}
    gold, wrong, made = agreement_run(tmp_path, env, 50, subprocess_env=sub)
    report("library (docs example pack)", gold, wrong, made, time.perf_counter() - start)
    assert_outcomes(gold, wrong, made, 50)


# ------------------------------------------------------------------ what the policy gets wrong is a reward of 0
def test_malformed_calls_unknown_tools_and_a_raising_tool_give_reward_0_with_the_reason_logged(tmp_path, caplog):
    from evosyn.flows.rl_env import load_environment

    airline = get_domain("airline")
    _, _, rows = synthesized(tmp_path / "home", airline, 3)
    rows = rows[:3]
    write_rl_jsonl(rows, tmp_path / "export")
    loaded = load_environment(tmp_path / "export" / "tasks.jsonl", max_turns=MAX_TURNS)

    def call(name: str, arguments: str) -> dict[str, Any]:
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]}

    bye = {"role": "assistant", "content": "Thank you, goodbye."}
    broken = {  # one way to break per task: unreadable arguments, a tool that does not exist, one that raises
        rows[0]["task_id"]: [call("get_user_details", '{"user_id": '), bye],
        rows[1]["task_id"]: [call("teleport_passenger", '{"user_id": "mia_li_3668"}'), bye],
        rows[2]["task_id"]: [call("book_reservation", "{}"), bye],  # no arguments: the tool raises TypeError
    }
    tasks = {r["task_id"]: SynthTask.model_validate(r["task"]) for r in rows}
    caplog.set_level(logging.INFO, logger="evosyn.rl")
    with ScriptServer(rows, {"broken": broken}) as server:
        outputs = evaluate(loaded, server.base_url, "broken")
    assert len(outputs) == 3
    by_task = {_info(o)["task_id"]: o for o in outputs}
    for task_id, out in by_task.items():
        assert not out.get("error") and out["reward"] == 0.0 and out["metrics"]["check_executable"] == 0.0, out
        tool_result = _plain(out["completion"][1])
        assert tool_result["role"] == "tool" and tool_result["content"].startswith("Error"), tool_result
        assert any(task_id in r.getMessage() and "executable" in r.getMessage() for r in caplog.records
                   if r.name == "evosyn.rl"), task_id
    # and `evosyn verify` agrees on each
    got = check_agreement(outputs, tasks, airline, tmp_path / "home", tmp_path / "export" / "tasks.json")
    assert got.agree_cli == 3 and got.reward_1 == 0


# ------------------------------------------------------------------ the real export, installed
EVALUATE_INSTALLED = """
import asyncio, json, sys
import verifiers as vf
from openai import AsyncOpenAI

env = vf.load_environment(sys.argv[1])
client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=sys.argv[2], api_key="EMPTY"))
res = asyncio.run(env.evaluate(client=client, model=sys.argv[3], num_examples=-1, rollouts_per_example=1,
                               max_concurrent=4))
rows = [{"info": o["info"], "prompt": o["prompt"], "completion": o["completion"], "reward": o["reward"],
         "metrics": o["metrics"], "error": o.get("error")} for o in res["outputs"]]
json.dump({"n": len(env.eval_dataset), "outputs": rows}, open(sys.argv[4], "w"), default=lambda m: m.model_dump())
"""


@pytest.mark.slow
def test_the_cli_export_installs_and_its_rollouts_get_the_reward_evosyn_verify_gives(tmp_path):
    """``evosyn synth`` then ``evosyn export --format verifiers``, ``pip install -e`` into this venv, and verifiers'
    ``load_environment`` by the package's name evaluated in a process of its own; uninstalled afterwards."""
    from evosyn.flows.cli import main
    from evosyn.tasks.exports.rl import module_name

    home, out = tmp_path / "home", tmp_path / "env"
    for args in (["synth", "--domain", "airline", "--n", "16", "--seed", "0", "--quiet"],
                 ["export", "--run", "synth-airline-s0-n16", "--format", "verifiers", "--output", str(out)]):
        result = CliRunner().invoke(main, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    module = module_name("synth-airline-s0-n16")
    dist = module.replace("_", "-")
    store = Store(home, create=False)
    rows = [json.loads(line) for line in (out / module / "tasks.jsonl").read_text().splitlines()]
    train = {e.task_id for e in select_examples(store, "synth-airline-s0-n16").train}
    assert {r["task_id"] for r in rows} == train and len(rows) >= 8  # exactly the run's verified training tasks
    gold = gold_scripts(rows, teacher_turns(store, "synth-airline-s0-n16"))
    pip = [sys.executable, "-m", "pip"]
    # --no-deps: evosyn[rl] is this checkout, installed already (its extras are the venv's business, not the test's)
    done = subprocess.run([*pip, "install", "--no-deps", "-e", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    try:
        with ScriptServer(rows, {"gold": gold}) as server:
            script = tmp_path / "evaluate.py"
            script.write_text(EVALUATE_INSTALLED)
            done = subprocess.run([sys.executable, str(script), dist, server.base_url, "gold",
                                   str(tmp_path / "out.json")], capture_output=True, text=True, timeout=600,
                                  cwd=tmp_path, env={**os.environ, "EVOSYN_HOME": str(home)}, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
    finally:
        subprocess.run([*pip, "uninstall", "-y", dist], capture_output=True, timeout=120, check=False)
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["n"] == len(rows) == len(result["outputs"])
    tasks = {r["task_id"]: SynthTask.model_validate(r["task"]) for r in rows}
    got = check_agreement(result["outputs"], tasks, get_domain("airline"), home, out / module / "tasks.json")
    assert got.agree_cli == len(rows) and got.reward_1 >= 0.9 * len(rows)
    print(f"\n[rl-agreement] installed export (airline): {got.rollouts} tasks, gold reward 1 {got.reward_1}, "
          f"agreement with `evosyn verify` {got.agree_cli}/{got.rollouts}")
