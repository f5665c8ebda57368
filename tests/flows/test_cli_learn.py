import json

import pytest

from tests.flows.test_cli import evosyn

RUN = "synth-airline-s5-n60"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("learn") / "h"
    out = evosyn("synth", "--n", "60", "--seed", "5", home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    return home


def test_train_evaluate_and_join_back(home):
    out = evosyn("train", "--run", RUN, "--round", "0", home=home)
    assert out.returncode == 0 and "trained the embedded learner" in out.stdout, out.stderr[-1500:]
    out = evosyn("evaluate", "--run", RUN, "--round", "0", "--set", "diagnostic", home=home)
    assert out.returncode == 0 and "diagnostic:" in out.stdout and "num_write" in out.stdout, out.stderr[-1500:]
    sql = ("select count(*) as n, count(t.task_id) as with_task, count(tr.trajectory_id) as with_traj, "
           "count(distinct e.model_version) as models from evaluations e "
           "left join tasks t on t.task_id = e.task_id and t.run_id = e.run_id "
           "left join trajectories tr on tr.trajectory_id = e.trajectory_id and tr.run_id = e.run_id")
    row = json.loads(evosyn("query", sql, "--format", "json", home=home).stdout)
    assert row["n"] > 0 and row["n"] == row["with_task"] == row["with_traj"] and row["models"] == 1


def test_exports(home, tmp_path):
    sql = f"select count(*) filter (split = 'train') as t, count(*) filter (split = 'diagnostic') as d " \
          f"from sft_examples where run_id = '{RUN}'"
    counts = json.loads(evosyn("query", sql, "--format", "json", home=home).stdout)
    for fmt, name in (("sharegpt", "evosyn.json"), ("openai", "train.jsonl"), ("tau2", "tasks.json")):
        out = evosyn("export", "--run", RUN, "--format", fmt, "--output", str(tmp_path / fmt), home=home)
        assert out.returncode == 0, out.stderr[-1500:]
        assert (tmp_path / fmt / name).exists()
        what = "tau2 tasks" if fmt == "tau2" else "training examples"  # exported, held out and dropped, every format
        assert out.stdout.strip() == f"exported {counts['t']} {what} ({fmt}) to {tmp_path / fmt}; " \
                                     f"held out {counts['d']} diagnostic; dropped 0"
    info = json.loads((tmp_path / "sharegpt" / "dataset_info.json").read_text())
    assert info["evosyn"]["formatting"] == "sharegpt" and info["evosyn"]["columns"]["tools"] == "tools"
    from envs.packs import get_domain

    policy = get_domain("airline").policy  # the system prompt the served agent gets, in both exports
    assert all(r["system"] == policy for r in json.loads((tmp_path / "sharegpt" / "evosyn.json").read_text()))
    lines = (tmp_path / "openai" / "train.jsonl").read_text().splitlines()
    assert all(json.loads(x)["messages"][0] == {"role": "system", "content": policy} for x in lines)
    assert json.loads((tmp_path / "openai" / "dataset_info.json").read_text())["evosyn"]["formatting"] == "openai"
    from tau2.data_model.tasks import Task

    tasks = json.loads((tmp_path / "tau2" / "tasks.json").read_text())
    assert [Task.model_validate(t).id for t in tasks]


def test_a_conversation_sharegpt_cannot_hold_is_dropped_with_its_reason(home, tmp_path):
    from flows.cli_learn import _export
    from tasks.hf_export import select_examples
    from storage.records import ToolCall
    from storage.store import Store

    store = Store(home, create=False)
    chosen = select_examples(store, RUN)
    bad = chosen.train[0]
    two = next(i for i, m in enumerate(bad.messages) if m.tool_calls)
    msgs = list(bad.messages)
    msgs[two] = msgs[two].model_copy(update={"tool_calls": [*msgs[two].tool_calls, ToolCall(id="x", name="y")]})
    chosen.train[0] = bad.model_copy(update={"messages": msgs})
    n, dropped = _export(store, RUN, chosen, "sharegpt", tmp_path / "s")
    assert n == len(chosen.train) - 1 and len(json.loads((tmp_path / "s" / "evosyn.json").read_text())) == n
    assert dropped == {"not a ShareGPT conversation (2 tool calls but 1 results)": 1}


def test_missing_inputs_are_one_line_errors(home):
    out = evosyn("train", "--run", "nope", "--round", "0", home=home)
    assert out.returncode == 2 and out.stderr.startswith("error: --run nope") and out.stderr.count("\n") == 1
    out = evosyn("evaluate", "--run", RUN, "--round", "9", home=home)
    assert out.returncode == 2 and "no trained model" in out.stderr


@pytest.mark.slow
def test_bench_learner_reports_cpu_per_trajectory_and_per_task(tmp_path):
    target = tmp_path / "learner.json"
    out = evosyn("bench", "learner", "--domain", "airline", "--sizes", "0,12", "--test-size", "4",
                 "--ablation-size", "0", "--output", str(target), home=tmp_path / "h")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "CPU ms/evaluated task" in out.stdout and "s CPU" in out.stdout
    data = json.loads(target.read_text())
    empty, trained = data["curve"]
    assert empty["size"] == 0 and empty["train_cpu_ms_per_trajectory"] is None
    assert trained["size"] == 12 and trained["train_cpu_seconds"] > 0 and trained["eval_cpu_ms_per_task"] > 0
    assert trained["train_cpu_ms_per_trajectory"] == pytest.approx(1000 * trained["train_cpu_seconds"] / 12)
    assert data["largest"]["size"] == 12
    assert data["largest"]["train_cpu_seconds"] == trained["train_cpu_seconds"]
    phases = trained["train_cpu_by_phase"]
    assert list(phases) == ["conventions", "features", "hashing", "sgd"] and phases["sgd"] > 0
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= trained["train_cpu_seconds"] + 1e-6
    assert empty["train_cpu_by_phase"]["hashing"] == empty["train_cpu_by_phase"]["sgd"] == 0.0  # no model fitted
    assert "its training CPU by phase: conventions" in out.stdout
    by_model = trained["train_sgd_by_model"]
    assert "argument" in by_model and by_model["argument"]["rows"] > 0 and empty["train_sgd_by_model"] == {}
    assert sum(m["cpu_seconds"] for m in by_model.values()) == pytest.approx(phases["sgd"], abs=1e-6)
    assert "its sgd by model: " in out.stdout and "argument" in out.stdout.split("its sgd by model: ")[1]


def test_bench_learner_without_a_test_task_is_a_one_line_error(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import tasks.testset as testset
    from flows.cli import main

    monkeypatch.setattr(testset, "test_cases", lambda *args, **kwargs: [])  # a generator that builds no test task
    out = CliRunner().invoke(main, ["--home", str(tmp_path / "h"), "bench", "learner", "--domain", "airline",
                                    "--sizes", "0", "--test-size", "4", "--ablation-size", "0"])
    assert out.exit_code == 2
    assert "--test-size 4: the airline generator built no official-matched test task" in out.output
