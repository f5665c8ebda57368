"""`evosyn evaluate --official`: the embedded learner on airline's test split, offline; every bad input one line."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from evosyn.flows.cli import main

RUN = "official-cli"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store with one small verified pass of run ``RUN`` and its embedded learner trained on it (round 0)."""
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_domain, get_pack
    from evosyn.agents.designer import ColdStart
    from evosyn.tasks.learn import train_round
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass
    from evosyn.storage.store import Store

    store = Store(tmp_path_factory.mktemp("official") / "h")
    space = load_initial_space(get_pack("airline"), run_id=RUN)
    run_pass(Ctx(store, RUN, 0, 3, get_domain("airline")), space, ColdStart(), 40)
    learner, _, _ = train_round(store, RUN, 0, get_domain("airline"))
    assert learner.n_trajectories > 0
    return store


def _invoke(store, *args, env=None):
    return CliRunner().invoke(main, ["--home", str(store.root), "evaluate", *args], env=env or {})


@pytest.mark.slow
def test_the_embedded_learner_on_airlines_test_split_prints_rewards_per_task_and_pass_k(trained):
    from evosyn.envs.packs import get_domain
    from evosyn.tasks.official import is_success, pass_hat_ks
    from evosyn.storage.tracking import Tracker

    result = _invoke(trained, "--official", "--domain", "airline", "--split", "test", "--run", RUN, "--round", "0",
                     "--agent", "embedded", "--user", "embedded", "--trials", "2", "--quiet")
    assert result.exit_code == 0, (result.output, result.exception)
    test_ids = [t.id for t in get_domain("airline").tasks("test")]
    rows = [e for e in trained.read_records("evaluations", run_id=RUN) if e.task_set == "official:test"]
    assert sorted((e.task_id, e.trial) for e in rows) == sorted((i, k) for i in test_ids for k in (0, 1))
    out = result.stdout
    for e in rows:  # every task's line shows its rewards, trial by trial
        assert re.search(rf"│ {re.escape(e.task_id)} +│ [0-9. ]*", out), e.task_id
    by_task = {}
    for e in sorted(rows, key=lambda e: e.trial):
        by_task.setdefault(e.task_id, []).append(is_success(e.reward))
    want = pass_hat_ks(by_task)
    assert f"pass^k k=1: {want[1]:.3f}  k=2: {want[2]:.3f}" in out
    # the learner is deterministic and so is the scripted user: its two trials agree, task by task
    assert all(len(set(v)) == 1 for v in by_task.values())
    # MLflow: a run of its own, tagged with the split, holding the same pass^k
    tracker = Tracker(trained.root)
    found = tracker.client.search_runs([tracker.experiment_id], "tags.`evosyn.level` = 'official'")
    assert len(found) == 1 and found[0].data.tags["evosyn.task_set"] == "official:test"
    assert found[0].data.metrics["official_pass_hat_2"] == pytest.approx(want[2])
    assert found[0].data.params["trials"] == "2"
    # run again: the same rows (ids, rewards), the same MLflow run
    again = _invoke(trained, "--official", "--domain", "airline", "--split", "test", "--run", RUN, "--round", "0",
                    "--trials", "2", "--quiet")
    assert again.exit_code == 0 and again.stdout == out
    rows2 = [e for e in trained.read_records("evaluations", run_id=RUN) if e.task_set == "official:test"]
    assert sorted((e.evaluation_id, e.reward) for e in rows2) == sorted((e.evaluation_id, e.reward) for e in rows)


@pytest.mark.parametrize("args, message", [
    (["--split", "dev"], "--split dev: not a split of tau2's airline tasks (known: train, test, base)"),
    (["--trials", "0"], "--trials 0: must be at least 1"),
    (["--agent", "gpt-4o"], "--agent 'gpt-4o': unknown agent"),
    (["--agent", "openai_compatible:m"], "--agent-base-url is missing"),
    (["--agent", "openai_compatible:m", "--agent-base-url", "http://127.0.0.1:9/v1", "--agent-key-env", "NO_SUCH_KEY"],
     "--agent-key-env: environment variable NO_SUCH_KEY is not set"),
    (["--user", "openai:gpt-4o"], "--user-key-env: environment variable OPENAI_API_KEY is not set"),
    (["--user", "llama:7b"], "--user 'llama:7b': unknown user"),
    (["--run", RUN], "--run and --round: give both"),
    (["--tasks", "/no/such/folder"], "--tasks /no/such/folder: /no/such/folder: not a folder"),
])
def test_bad_input_is_one_error_line_before_any_work(trained, args, message):
    before = len(trained.read_records("evaluations", run_id=RUN))
    base = ["--official", "--domain", "airline"] + ([] if "--run" in args else ["--run", RUN, "--round", "0"])
    result = _invoke(trained, *base, *args)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert len(trained.read_records("evaluations", run_id=RUN)) == before


def test_the_tasks_of_a_tau2_data_folder_are_evaluated_and_the_task_set_printed_and_stored(trained, tmp_path):
    """`--tasks FOLDER` (e.g. a tau2-bench v1.0.1 checkout): its split is played; the output, the MLflow run and
    the result name the folder and the tasks file's SHA-256."""
    import hashlib
    import json

    from evosyn.envs.packs import get_domain
    from evosyn.envs.tau2.task_folder import package_folder
    from evosyn.storage.tracking import Tracker

    raw = json.loads((package_folder("airline") / "tasks.json").read_text())
    test_ids = [t.id for t in get_domain("airline").tasks("test")][:2]
    folder = tmp_path / "tau2-bench" / "data" / "tau2" / "domains" / "airline"
    folder.mkdir(parents=True)
    (folder / "tasks.json").write_text(json.dumps([t for t in raw if t["id"] in test_ids]))
    (folder / "split_tasks.json").write_text(json.dumps({"test": test_ids}))
    digest = hashlib.sha256((folder / "tasks.json").read_bytes()).hexdigest()
    result = _invoke(trained, "--official", "--domain", "airline", "--run", RUN, "--round", "0",
                     "--tasks", str(tmp_path / "tau2-bench"), "--quiet")
    assert result.exit_code == 0, (result.output, result.exception)
    label = f"airline tasks from path {folder} (tasks.json sha256 {digest[:12]})"
    assert f"tasks: {label}" in result.stderr.splitlines() and result.stdout.splitlines()[-1] == f"tasks: {label}"
    rows = [e for e in trained.read_records("evaluations", run_id=RUN) if e.task_set == "official:test"]
    assert set(test_ids) <= {e.task_id for e in rows}
    tracker = Tracker(trained.root)
    found = tracker.client.search_runs([tracker.experiment_id], f"tags.`evosyn.tasks_sha256` = '{digest}'")
    assert len(found) == 1 and found[0].data.params["tasks"] == label


def test_the_embedded_agent_needs_a_run_and_official_options_need_official(trained):
    result = _invoke(trained, "--official", "--domain", "airline")
    assert result.exit_code == 2 and result.stderr.startswith("error: --agent embedded: needs --run and --round")
    result = _invoke(trained, "--run", RUN, "--round", "0", "--trials", "3")
    assert result.exit_code == 2 and result.stderr.strip() == "error: --trials: only with --official"
    result = _invoke(trained, "--round", "0")
    assert result.exit_code == 2 and result.stderr.startswith("error: --run: missing")


def test_an_agent_endpoint_that_is_down_fails_in_one_line(trained):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = _invoke(trained, "--official", "--domain", "airline", "--agent", "openai_compatible:m",
                     "--agent-base-url", f"http://127.0.0.1:{port}/v1", "--max-tasks", "1", "--quiet")
    assert result.exit_code == 1, (result.output, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"the server at http://127.0.0.1:{port}/v1 failed: " in errors[0]
    assert "unavailable after 3 attempts: APIConnectionError" in errors[0]


@pytest.mark.slow  # the Anthropic SDK and litellm's imports and MLflow's first sqlite schema: ~20 s
def test_an_llm_user_through_the_anthropic_api_plays_the_tasks_and_its_calls_are_stored(trained):
    from tests.fakes.anthropic_server import AnthropicServer, anthropic_reply

    def respond(request):  # the customer: one request, then it ends the call
        own = [m for m in request.body["messages"] if m["role"] == "assistant"]
        return anthropic_reply("Thanks, that is all. ###STOP###" if own else "Hi, I need help with my booking.")

    key = "sk-test-SECRET-official"
    with AnthropicServer(respond) as server:
        result = _invoke(trained, "--official", "--domain", "airline", "--run", RUN, "--round", "0",
                         "--user", "anthropic:claude-haiku-4-5", "--user-base-url", server.anthropic_base_url,
                         "--user-key-env", "EVOSYN_TEST_OFFICIAL_KEY", "--task-ids", "2,6", "--quiet",
                         env={"EVOSYN_TEST_OFFICIAL_KEY": key})
        asked = len(server.requests)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "agent embedded, user anthropic:claude-haiku-4-5" in result.stderr and "pass^k k=1:" in result.stdout
    assert asked >= 4  # two tasks, an opening and at least one answer each
    calls = [c for c in trained.read_records("llm_calls", run_id=RUN) if c.role == "user"]
    assert len(calls) == asked and all(c.status == "ok" for c in calls)
    assert key not in result.output and not any(key in c.model_dump_json() for c in calls)
    rows = [e for e in trained.read_records("evaluations", run_id=RUN) if e.task_set == "official:test"
            and e.task_id in ("2", "6")]
    assert {e.task_id for e in rows} == {"2", "6"}
