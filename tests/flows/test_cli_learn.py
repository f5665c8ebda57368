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
    from evosyn.envs.packs import get_domain

    policy = get_domain("airline").policy  # the system prompt the served agent gets, in both exports
    assert all(r["system"] == policy for r in json.loads((tmp_path / "sharegpt" / "evosyn.json").read_text()))
    lines = (tmp_path / "openai" / "train.jsonl").read_text().splitlines()
    assert all(json.loads(x)["messages"][0] == {"role": "system", "content": policy} for x in lines)
    assert json.loads((tmp_path / "openai" / "dataset_info.json").read_text())["evosyn"]["formatting"] == "openai"
    from tau2.data_model.tasks import Task

    tasks = json.loads((tmp_path / "tau2" / "tasks.json").read_text())
    assert [Task.model_validate(t).id for t in tasks]


def test_a_conversation_sharegpt_cannot_hold_is_dropped_with_its_reason(home, tmp_path):
    from evosyn.flows.cli_learn import _export
    from evosyn.tasks.exports.hf import select_examples
    from evosyn.storage.records import ToolCall
    from evosyn.storage.store import Store

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
