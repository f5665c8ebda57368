"""`evosyn export --format rl-jsonl | verifiers`: exactly the run's verified training tasks, filtered by round and
slice, as rows a trainer reads and a `verifiers` environment that loads them; bad input is one line."""
import importlib.util
import json
import shutil
import sys

import pytest
from evosyn.envs.packs import get_domain
from evosyn.storage.records import SynthTask
from evosyn.storage.store import Store
from evosyn.tasks.exports.rl import SCORE_ENTRY, module_name, parse_slices, rl_rows

from tests.flows.test_cli import evosyn

pytest.importorskip("verifiers")  # the [dev] extra (and [rl])

RUN = "synth-airline-s1-n12"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("rl") / "h"
    out = evosyn("synth", "--n", "12", "--seed", "1", home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    return home


@pytest.fixture(scope="module")
def airline():
    return get_domain("airline")


def split_ids(store, split):
    return {e.task_id for e in store.read_records("sft_examples", run_id=RUN) if e.split == split}


def test_rows_are_exactly_the_runs_verified_training_tasks(home, airline):
    store = Store(home, create=False)
    train, diagnostic = split_ids(store, "train"), split_ids(store, "diagnostic")
    assert train and diagnostic and not train & diagnostic
    out = rl_rows(store, RUN, airline)
    assert [r["task_id"] for r in out.rows] == sorted(train)  # one round: task id order
    assert out.held_out == len(diagnostic) and not out.dropped
    passed = {v.task_id: v for v in store.read_records("verdicts", run_id=RUN) if v.passed}
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id=RUN)}
    for r in out.rows:
        task = tasks[r["task_id"]]
        assert r["task"] == task.model_dump(mode="json") and r["domain"] == "airline" and r["run_id"] == RUN
        assert r["observed"] == passed[task.task_id].observed  # the verified solution's factors
        system, opening = r["prompt"][:2]
        assert system["role"] == "system" and system["content"] == airline.task_policy(
            airline.task_from_json(task.definition))
        assert opening["role"] == "user" and opening["content"]
        assert {t["function"]["name"] for t in r["tools"]} >= {"get_user_details", "book_reservation"}
        assert r["score"]["python"] == SCORE_ENTRY and f"--task-id {task.task_id}" in r["score"]["cli"]


def test_round_keeps_rounds_up_to_it(home, airline, tmp_path):
    root = tmp_path / "h"
    shutil.copytree(home, root)
    store = Store(root, create=False)
    base = [r["task_id"] for r in rl_rows(store, RUN, airline).rows]
    # three of the run's tasks again as round 1 (new ids): a later round's verified tasks
    picked = base[:3]
    new = {t: f"{t}-r1" for t in picked}
    for table in ("tasks", "verdicts", "sft_examples"):
        recs = [r for r in store.read_records(table, run_id=RUN) if r.task_id in new]
        ids = {"example_id": lambda r: r.example_id + "-r1"} if table == "sft_examples" else {}
        store.write([r.model_copy(update={"round": 1, "task_id": new[r.task_id],
                                          **{k: f(r) for k, f in ids.items()}}) for r in recs], "later")
    assert [r["task_id"] for r in rl_rows(store, RUN, airline, round=0).rows] == base
    later = [r["task_id"] for r in rl_rows(store, RUN, airline, round=1).rows]
    assert later == base + sorted(new.values())  # (round, task id) order
    assert [r["task_id"] for r in rl_rows(store, RUN, airline).rows] == later
    assert {r["round"] for r in rl_rows(store, RUN, airline).rows} == {0, 1}


def test_slices_keep_tasks_whose_verified_solution_shows_the_values(home, airline):
    store = Store(home, create=False)
    rows = rl_rows(store, RUN, airline).rows
    values = sorted({v for r in rows for v in r["observed"]["num_write"]})
    families = sorted({v for r in rows for v in r["observed"]["task_family"]})
    assert len(values) >= 2 and len(families) >= 2, (values, families)

    def ids(slices):
        return [r["task_id"] for r in rl_rows(store, RUN, airline, slices=slices).rows]

    def where(pred):
        return [r["task_id"] for r in rows if pred(r["observed"])]

    one = ids({"num_write": {values[0]}})
    assert one and one == where(lambda o: values[0] in o["num_write"]) and len(one) < len(rows)
    either = ids(parse_slices([f"num_write={values[0]}", f"num_write={values[1]}"]))
    assert either == where(lambda o: {values[0], values[1]} & set(o["num_write"])) and len(either) > len(one)
    both = ids(parse_slices([f"num_write={values[0]}", f"task_family={families[0]}"]))
    assert both == where(lambda o: values[0] in o["num_write"] and families[0] in o["task_family"])
    none = rl_rows(store, RUN, airline, slices={"num_write": {"no-such-value"}})
    assert none.rows == [] and none.dropped == {"outside the --slice filter": len(rows)}
    assert ids({"no_such_factor": {"1"}}) == []


def test_parse_slices():
    assert parse_slices(["num_write=2", " num_write = 3", "task_family=flight_booking"]) == {
        "num_write": {"2", "3"}, "task_family": {"flight_booking"}}
    assert parse_slices([]) == {}
    for bad in ("num_write", "=2", "num_write=", " = "):
        with pytest.raises(ValueError) as exc:
            parse_slices(["task_family=x", bad])
        msg = str(exc.value)
        assert "\n" not in msg and msg.startswith(f"--slice {bad!r}") and "FACTOR=VALUE" in msg


def test_rl_jsonl_cli_writes_one_line_per_task_and_the_tasks_evosyn_verify_reads(home, airline, tmp_path):
    out_dir = tmp_path / "rl"
    out = evosyn("export", "--run", RUN, "--format", "rl-jsonl", "--output", str(out_dir), home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    store = Store(home, create=False)
    train, held = split_ids(store, "train"), len(split_ids(store, "diagnostic"))
    assert out.stdout.strip() == f"exported {len(train)} tasks (rl-jsonl) to {out_dir}; held out {held} diagnostic"
    lines = (out_dir / "tasks.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    assert rows == json.loads(json.dumps(rl_rows(store, RUN, airline).rows))
    assert [r["task_id"] for r in rows] == sorted(train)
    assert all({"prompt", "tools", "task", "score", "observed", "format"} <= set(r) for r in rows)
    defs = json.loads((out_dir / "tasks.json").read_text())
    assert defs == [SynthTask.model_validate(r["task"]).definition for r in rows] and [d["id"] for d in defs] == [r["task_id"] for r in rows]

    # the row's `score.cli` works as written: the teacher's verified conversation of that task passes
    first = rows[0]["task_id"]
    passed = {v.trajectory_id for v in store.read_records("verdicts", run_id=RUN) if v.passed}
    traj = next(t for t in store.read_records("trajectories", run_id=RUN)
                if t.task_id == first and t.trajectory_id in passed)
    (out_dir / "t.json").write_text(json.dumps({"messages": [m.model_dump(mode="json") for m in traj.messages],
                                                "termination": traj.termination}))
    cmd = rows[0]["score"]["cli"].replace("TRAJECTORY.json", "t.json").split()[1:]
    got = evosyn(*cmd, home=home, cwd=out_dir)
    assert got.returncode == 0, got.stdout[-800:] + got.stderr[-800:]
    assert json.loads(got.stdout)["passed"] is True


def test_verifiers_cli_writes_a_package_that_loads_the_filtered_tasks(home, airline, tmp_path):
    store = Store(home, create=False)
    rows = rl_rows(store, RUN, airline).rows
    value = min({v for r in rows for v in r["observed"]["num_write"]})
    want = [r["task_id"] for r in rl_rows(store, RUN, airline, round=0, slices={"num_write": {value}}).rows]
    assert 0 < len(want) < len(rows)
    out_dir = tmp_path / "pkg"
    out = evosyn("export", "--run", RUN, "--format", "verifiers", "--output", str(out_dir), "--round", "0",
                 "--slice", f"num_write={value}", home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    assert out.stdout.startswith(f"exported {len(want)} tasks (verifiers) to {out_dir}; held out ")
    assert f"outside the --slice filter: {len(rows) - len(want)}" in out.stdout
    module = module_name(RUN)
    assert module == "evosyn_env_synth_airline_s1_n12"
    assert {p.name for p in out_dir.iterdir()} == {"pyproject.toml", "README.md", module}
    assert {p.name for p in (out_dir / module).iterdir()} >= {"__init__.py", "tasks.jsonl", "tasks.json"}
    pyproject = (out_dir / "pyproject.toml").read_text()
    assert f'packages = ["{module}"]' in pyproject and "evosyn[rl]" in pyproject
    assert module.replace("_", "-") in (out_dir / "README.md").read_text()

    from evosyn.flows.rl_env import load_environment
    from evosyn.tasks.exports.verifiers_env import EvosynEnv

    env = load_environment(out_dir / module / "tasks.jsonl", max_turns=7)
    assert isinstance(env, EvosynEnv) and env.max_turns == 7
    assert [json.loads(i)["task_id"] for i in env.dataset["info"]] == want
    assert [json.loads(i)["task_id"] for i in env.eval_dataset["info"]] == want
    # the package's own entry point, as `verifiers.load_environment` calls it once installed
    spec = importlib.util.spec_from_file_location(module, out_dir / module / "__init__.py")
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[module] = pkg
    try:
        spec.loader.exec_module(pkg)
        loaded = pkg.load_environment(task_ids=want[:1])
    finally:
        del sys.modules[module]
    assert [json.loads(i)["task_id"] for i in loaded.dataset["info"]] == want[:1]


def test_cli_errors_are_one_line(home, tmp_path):
    out = evosyn("export", "--run", RUN, "--format", "sharegpt", "--output", str(tmp_path / "s"),
                 "--slice", "num_write=1", home=home)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith("error: --slice num_write=1: only with --format verifiers or rl-jsonl")
    out = evosyn("export", "--run", RUN, "--format", "rl-jsonl", "--output", str(tmp_path / "r"),
                 "--slice", "num_write", home=home)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and out.stderr.startswith("error: --slice")
    assert not (tmp_path / "s").exists() and not (tmp_path / "r").exists()


def test_a_run_without_verified_tasks_is_one_error_line(home, tmp_path):
    root = tmp_path / "h"
    shutil.copytree(home, root)
    store = Store(root, create=False)
    for part in store.partition_dir("sft_examples", RUN, 0).glob("*.parquet"):
        part.unlink()
    assert store.read_records("sft_examples", run_id=RUN) == []
    out = evosyn("export", "--run", RUN, "--format", "verifiers", "--output", str(tmp_path / "v"), home=root)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith(f"error: --run {RUN}: no verified tasks to export") and str(root) in out.stderr
    assert not (tmp_path / "v").exists()


@pytest.fixture(scope="module")
def exported(home, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("rlx")
    out = evosyn("export", "--run", RUN, "--format", "rl-jsonl", "--output", str(out_dir), home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    return (out_dir / "tasks.jsonl").read_text().splitlines()


def load_error(path, **kwargs):
    from evosyn.flows.rl_env import load_environment

    with pytest.raises(ValueError) as exc:
        load_environment(path, **kwargs)
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


def test_bad_files_and_options_are_one_value_error_line(exported, tmp_path):
    missing = tmp_path / "nope.jsonl"
    assert load_error(missing).startswith(f"{missing}: no such file")
    path = tmp_path / "t.jsonl"
    path.write_text(exported[0] + "\n{not json\n")
    assert load_error(path).startswith(f"{path}:2: not a JSON line")
    row = json.loads(exported[1])
    del row["tools"], row["prompt"]
    path.write_text(exported[0] + "\n" + json.dumps(row) + "\n")
    assert load_error(path).startswith(f"{path}:2: an rl-jsonl row needs prompt, tools")
    other = {**json.loads(exported[1]), "domain": "telecom"}
    path.write_text(exported[0] + "\n" + json.dumps(other) + "\n")
    assert load_error(path).startswith(f"{path}: tasks of several domains (airline, telecom)")
    path.write_text("\n".join(exported) + "\n")
    msg = load_error(path, task_ids=["syn-nope", json.loads(exported[0])["task_id"]])
    assert msg.startswith("task_ids: syn-nope not in") and str(path) in msg
    assert load_error(path, max_turns=0).startswith("max_turns: 0")
    path.write_text("\n")
    assert load_error(path).startswith(f"{path}: no tasks to load")
    unknown = {**json.loads(exported[0]), "domain": "no_such_domain"}
    path.write_text(json.dumps(unknown) + "\n")
    assert load_error(path).startswith(f"{path}: ")
