"""`learner: served`: the user's model behind an OpenAI-compatible server the test starts on 127.0.0.1, evaluated
each round by `evosyn run` (probe and test sets), trained between rounds by a hook command or not at all, and a
killed run resumed without re-sending a call it made."""
from __future__ import annotations

import json
import sys
from collections import Counter

import pytest

from evosyn.benchmarks.fake_llm_server import FakeLLMServer, error, openai_reply
from evosyn.storage.store import Store
from tests.flows.test_llm_run import cli

SHARED_PREFECT_API = True


def policy(request):
    """A weak served agent: it looks the customer up when it has an id, then says it cannot help."""
    body = request.body
    said = [m for m in body["messages"] if m["role"] == "assistant"]
    if not said:
        return openai_reply("Could you please give me your customer id?", model=body["model"])
    return openai_reply("I am sorry, I cannot help with that today. Goodbye.", model=body["model"])


def config(tmp_path, base_url: str, train: str = "none", hook: str = "", rounds: int = 3, extra: str = ""):
    hook_line = f"  hook: {{command: {json.dumps(hook)}}}\n" if hook else ""
    path = tmp_path / f"served-{train}.yaml"
    path.write_text(f"domain: airline\nrounds: {rounds}\nbudget: 12\nseed: 1\ntest_size: 10\nprobe_size: 6\n"
                    f"chunk_size: 6\nstop_after_static_rounds: 0\n{extra}learner: served\nserved:\n  base_url: '{base_url}'\n  model: my-agent\n"
                    f"  max_concurrency: 4\n  max_steps: 6\n  train: {train}\n{hook_line}")
    return path


def run_id(home) -> str:
    return next(r.run_id for r in Store(home, create=False).read_records("runs"))


@pytest.mark.slow
def test_a_served_learner_is_evaluated_every_round_on_every_set_and_its_calls_are_rows(tmp_path):
    home = tmp_path / "home"
    with FakeLLMServer(policy) as server:
        official = "official_eval: {split: test, max_tasks: 3, max_steps: 6}\n"
        done = cli(home, "run", "--config", str(config(tmp_path, server.base_url, extra=official)), "--quiet",
                   key=None)
        assert done.returncode == 0, done.stderr[-3000:]
        sent = len(server.requests)
    store = Store(home, create=False)
    rid = run_id(home)
    evaluations = store.read_records("evaluations", run_id=rid)
    by = Counter((e.round, e.task_set) for e in evaluations)
    for rnd in (1, 2, 3):
        assert by[(rnd, "test")] == 10 and by[(rnd, "test_uniform")] == 10 and by[(rnd, "probe")] == 6, by
        assert by[(rnd, "official:test")] == 3, by  # tau2's official split too, every learner
    assert {e.model_version.split("/")[-1] for e in evaluations} == {
        json.loads((home / "models" / rid / "served-1.json").read_text())["fingerprint"]}
    calls = [c for c in store.read_records("llm_calls", run_id=rid) if c.role == "agent"]
    # each request sent is a row, once; a request asked again (the same conversation) is a cache hit, also a row
    assert sum(not c.cache_hit for c in calls) == sent and all(c.model == "my-agent" for c in calls)
    assert any(c.cache_hit for c in calls)
    feedback = store.read_records("feedback", run_id=rid)
    assert len(feedback) == 3  # the Reflector read its evaluations each round


@pytest.mark.slow
def test_a_hook_trains_between_rounds_and_its_model_is_the_one_evaluated_next(tmp_path):
    home, seen = tmp_path / "home", tmp_path / "hook.log"
    hook = tmp_path / "train.py"
    hook.write_text("import os, sys, pathlib\n"
                    "folder = pathlib.Path(sys.argv[-1])\n"
                    f"with open({str(seen)!r}, 'a') as f:\n"
                    "    f.write(os.environ['EVOSYN_ROUND'] + ' ' + os.environ['EVOSYN_MODEL'] + ' '\n"
                    "            + str(sum(1 for _ in open(folder / 'rl' / 'tasks.jsonl'))) + '\\n')\n"
                    "print('trained... done')\n"
                    "print('my-agent-r' + os.environ['EVOSYN_ROUND'])\n")
    with FakeLLMServer(policy) as server:
        done = cli(home, "run", "--config", str(config(tmp_path, server.base_url, "hook",
                                                       f"{sys.executable} {hook}")), "--quiet", key=None)
        assert done.returncode == 0, done.stderr[-3000:]
        models = Counter(r["body"]["model"] for r in server.requests)
    calls = [line.split() for line in seen.read_text().splitlines()]
    assert [c[:2] for c in calls] == [["1", "my-agent"], ["2", "my-agent-r1"], ["3", "my-agent-r2"]]
    assert all(int(c[2]) > 0 for c in calls)  # the export folder held the round's verified tasks
    assert set(models) == {"my-agent", "my-agent-r1", "my-agent-r2"}
    rid = run_id(home)
    by_round = {e.round: e.model_version for e in Store(home, create=False).read_records("evaluations", run_id=rid)
                if e.task_set == "test"}
    assert len(set(by_round.values())) == 3  # each round's model named in its evaluations


@pytest.mark.slow
def test_a_killed_run_resumes_without_re_sending_a_call(tmp_path, monkeypatch):
    home = tmp_path / "home"
    with FakeLLMServer(policy) as server:
        monkeypatch.setenv("EVOSYN_FAULT_KILL_AT", "evaluate@2")
        killed = cli(home, "run", "--config", str(config(tmp_path, server.base_url, rounds=2)), "--quiet", key=None)
        assert killed.returncode != 0
        monkeypatch.delenv("EVOSYN_FAULT_KILL_AT")
        rid = run_id(home)
        done = cli(home, "run", "--resume", rid, "--quiet", key=None)
        assert done.returncode == 0, done.stderr[-3000:]
        bodies = Counter(json.dumps(r["body"], sort_keys=True) for r in server.requests)
    again = {b: n for b, n in bodies.items() if n > 1}
    assert not again, f"{len(again)} requests sent twice"
    calls = [c for c in Store(home, create=False).read_records("llm_calls", run_id=rid) if c.role == "agent"]
    assert len({c.call_id for c in calls}) == len(calls)  # no row twice


@pytest.mark.slow
def test_pass_rates_per_task_and_an_export_keeps_exactly_the_window(tmp_path):
    home = tmp_path / "home"
    path = config(tmp_path, "http://127.0.0.1:1/v1", rounds=1)
    with FakeLLMServer(policy) as server:
        path.write_text(path.read_text().replace("http://127.0.0.1:1/v1", server.base_url)
                        + "  trials: 2\n  trials_temperature: 0.7\n")
        done = cli(home, "run", "--config", str(path), "--quiet", key=None)
        assert done.returncode == 0, done.stderr[-3000:]
        seeds = {r["body"].get("seed") for r in server.requests if r["body"].get("temperature") == 0.7}
    assert seeds == {1000, 1001}  # trial t: its own seed, so its own sample and cache entry
    store, rid = Store(home, create=False), run_id(home)
    trials = [e for e in store.read_records("evaluations", run_id=rid) if e.task_set.startswith("trials-")]
    kept = {e.task_id for e in store.read_records("sft_examples", run_id=rid)}
    assert Counter(e.task_id for e in trials) == {t: 2 for t in kept}  # every verified task, k = 2 times
    # a third trial that passes every other task: rates 1/3 and 0/3, and the window keeps exactly its side
    ordered = sorted(kept)
    passing = set(ordered[::2])
    extra = [e.model_copy(update={"task_set": "trials-2", "success": e.task_id in passing,
                                  "evaluation_id": e.evaluation_id[:-1] + "x"})
             for e in trials if e.task_set == "trials-0"]
    store.write(extra, "eval-trials-2")
    for window, expected in (("0.3,0.4", passing), ("0,0", set(ordered) - passing), ("0,1", set(ordered))):
        out = tmp_path / f"rl-{window}"
        done = cli(home, "export", "--run", rid, "--format", "rl-jsonl", "--output", str(out), "--pass-rate", window)
        assert done.returncode == 0, done.stderr[-2000:]
        rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
        train = {e.task_id for e in store.read_records("sft_examples", run_id=rid) if e.split == "train"}
        assert {r["task_id"] for r in rows} == expected & train, window
        assert all(r["pass_rate"]["trials"] == 3 for r in rows)
    report = cli(home, "report", rid)
    assert report.returncode == 0, report.stderr[-2000:]
    summary = next(home.rglob("summary.md")).read_text()
    section = summary.split("## Pass rates per task (pass@k trials)")[1].split("##")[0]
    assert "| num_write |" in section and "mean pass rate" in section
    bad = cli(home, "export", "--run", rid, "--format", "sharegpt", "--output", str(tmp_path / "x"), "--pass-rate", "0,1")
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: --pass-rate")


@pytest.fixture(scope="module")
def kept_airline(tmp_path_factory):
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_domain, get_pack
    from evosyn.tasks.context import Ctx
    from evosyn.tasks.synthesis import run_pass

    space = load_initial_space(get_pack("airline"), run_id="k")
    ctx = Ctx(Store(tmp_path_factory.mktemp("kept")), "k", 0, 3, get_domain("airline"))
    return run_pass(ctx, space, ColdStart(), 4).kept[0].task


def _learner(tmp_path, base_url: str, **fields):
    from evosyn.config import ServedLearnerConfig
    from evosyn.envs.packs import get_domain
    from evosyn.tasks.context import Ctx
    from evosyn.tasks.served import ServedLearner, ServedModel

    ctx = Ctx(Store(tmp_path / "home"), "r", 1, 0, get_domain("airline"))
    cfg = ServedLearnerConfig(base_url=base_url, model="my-agent", **fields)
    return ctx, ServedLearner(ctx, cfg, ServedModel(base_url, "my-agent"))


def test_a_request_the_model_refuses_ends_its_episode_as_agent_error_and_is_a_row(tmp_path, kept_airline):
    from evosyn.agents.learners.harness import run_episode

    with FakeLLMServer(lambda request: error(400, "this model's maximum context length is 8192 tokens")) as server:
        ctx, learner = _learner(tmp_path, server.base_url)
        try:
            traj = run_episode(learner, kept_airline, ctx.env, max_steps=3)
        finally:
            learner.close()
        learner.flush(ctx.store, "eval-test")
    assert traj.termination == "agent_error" and [m.role for m in traj.messages] == ["user"]
    calls = ctx.store.read_records("llm_calls", run_id="r")
    assert calls and all(c.status != "ok" and "8192" in c.error for c in calls)


def test_each_hook_answer_is_a_generation_cached_apart(tmp_path):
    from evosyn.tasks.served import HookFailed, ServedModel, _next_model

    first = ServedModel("http://127.0.0.1:8000/v1", "my-agent")
    same_name = _next_model("my-agent", first, 1)  # new weights reloaded under the same name
    assert same_name.generation == 1 and same_name.fingerprint != first.fingerprint
    assert _next_model("http://10.0.0.2:8000/v1 my-agent-r2", same_name, 2).base_url == "http://10.0.0.2:8000/v1"
    with pytest.raises(HookFailed, match="must not carry credentials") as got:
        _next_model("http://user:sk-SECRET@host/v1 m", first, 1)
    assert "SECRET" not in str(got.value)
    with pytest.raises(HookFailed, match="answer `model` or `base_url model`"):
        _next_model("done in 3 steps", first, 1)


def test_a_served_learner_is_checked_before_any_work(monkeypatch):
    from evosyn.config import RunConfig, ServedLearnerConfig
    from evosyn.flows.compile import check_served
    from evosyn.storage.userfiles import ConfigError

    with pytest.raises(ValueError, match="base_url: name the served endpoint"):
        ServedLearnerConfig(model="m")
    with pytest.raises(ValueError, match="served: `learner: served` needs the endpoint"):
        RunConfig(learner="served")
    monkeypatch.delenv("MY_ENDPOINT_KEY", raising=False)
    with pytest.raises(ConfigError, match="served.api_key_env: MY_ENDPOINT_KEY is not set"):
        check_served(ServedLearnerConfig(base_url="http://127.0.0.1:8000/v1", model="m",
                                         api_key_env="MY_ENDPOINT_KEY"))


def test_an_endpoint_that_cannot_be_reached_fails_the_run_with_one_line(tmp_path, kept_airline):
    from evosyn.agents.learners.harness import run_episode
    from evosyn.agents.roles import StageUnavailable
    from evosyn.tasks.served import HookFailed

    ctx, learner = _learner(tmp_path, "http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(StageUnavailable, match=r"served learner: the LLM at http://127.0.0.1:9/v1 cannot be used"):
        try:
            run_episode(learner, kept_airline, ctx.env, max_steps=2)
        finally:
            learner.close()
    from evosyn.agents.learners.llamafactory import TrainingError

    assert issubclass(HookFailed, TrainingError)  # a failed hook: the CLI's one-line run failure
