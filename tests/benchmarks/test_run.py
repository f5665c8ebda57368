"""`evosyn bench run`: the stage table from a launch's spans, and (slow) the real job as a subprocess."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from evosyn.benchmarks.run import STAGES, breakdown
from evosyn.storage.store import Store
from tests.prefect_home import PREFECT_HOME

RUN, ROUND = ["flow:run", "body:run"], ["flow:run", "body:run", "flow:round", "body:round"]


def span(kind, name, start, end, cpu=0.0, pcpu=0.0, under=(), round=0, pstart=0.0):
    return {"kind": kind, "name": name, "round": round, "start": start, "end": end, "cpu": cpu, "pstart": pstart,
            "pcpu": pcpu, "under": list(under), "thread": 1}


def launch_data() -> dict:
    spans = [
        span("startup", "prefect api", 0.5, 5, pcpu=2.7, pstart=0.3),
        span("startup", "run imports", 0.6, 2.6, pcpu=1.7, under=["startup:prefect api"]),
        span("flow", "run", 7, 95, pcpu=80, pstart=3.0),
        span("body", "run", 7.5, 94.5, pcpu=79, under=["flow:run"]),
        span("own", "test set", 8, 18, cpu=9, under=RUN),
        span("flow", "round", 18, 94, pcpu=70, under=RUN, round=1),
        span("body", "round", 18.5, 93.5, pcpu=69.5, under=RUN + ["flow:round"], round=1),
        span("task", "design", 19, 21, pcpu=1.8, under=ROUND, round=1),
        span("fn", "design", 19.5, 20.5, cpu=0.9, under=ROUND + ["task:design"], round=1),
        span("task", "generate+rollout+verify", 21, 41, pcpu=19, under=ROUND, round=1),
        span("fn", "generate", 21.5, 30, cpu=8, round=1),  # worker threads: inside nothing of theirs
        span("fn", "rollout", 30, 35, cpu=4, round=1),
        span("fn", "verify", 35, 40, cpu=4.5, round=1),
        span("own", "store.write", 36, 37, cpu=0.5, under=["fn:verify"], round=1),
        span("own", "store.read", 36.2, 36.4, cpu=0.1, under=["fn:verify", "own:store.write"], round=1),
        span("own", "tracking.log_metrics", 94.6, 94.9, cpu=0.2, under=RUN),
    ]
    marks = {"interpreter": {"at": 0.1, "pcpu": 0.05}, "cli imported": {"at": 0.2, "pcpu": 0.1}}
    return {"spans": spans, "marks": marks, "launched": 0.0, "ended": 100.0, "cpu_total": 88.6, "maxrss_kb": 1024,
            "usage": {"cpu_self": 83.4, "cpu_children": 5.0, "maxrss_kb": 2048, "children_maxrss_kb": 1024}}


def test_orchestration_is_each_call_minus_what_it_wraps():
    out = breakdown(launch_data())
    rows = {r["part"]: r for r in out["rows"]}
    assert [r["part"] for r in out["rows"] if r["group"] == "stages"] == list(STAGES)
    # the run's imports (2 s) overlap the API's 4.5 s: 2.5 s of waiting beyond them
    assert rows["imports"]["wall_s"] == pytest.approx(0.1 + 2) and rows["imports"]["cpu_s"] == pytest.approx(1.75)
    assert (rows["prefect api"]["wall_s"], rows["prefect api"]["cpu_s"]) == pytest.approx((2.5, 1.0))
    assert rows["checks"]["wall_s"] == pytest.approx(2.3)  # launch -> run flow call is 7 s in all
    assert sum(r["wall_s"] for r in out["rows"] if r["group"] == "start-up" and r["part"] != "exit") == \
        pytest.approx(7)
    assert (rows["design"]["wall_s"], rows["design"]["cpu_s"]) == pytest.approx((1.0, 0.9))
    assert "store 1.00s" in rows["verify"]["note"]  # the nested read is inside the write, counted once
    # design: 2 s call around 1 s of function; the mapped group: 20 s around 18.5 s of functions
    assert rows["task engine"]["wall_s"] == pytest.approx(1.0 + 1.5)
    assert rows["task engine"]["cpu_s"] == pytest.approx((1.8 - 0.9) + (19 - 16.5))
    assert rows["flow engine"]["wall_s"] == pytest.approx(1.0 + 1.0)  # each flow call minus its body
    assert rows["store (parquet)"]["wall_s"] == pytest.approx(1.0)
    assert rows["tracking (mlflow)"]["cpu_s"] == pytest.approx(0.2)
    assert rows["prefect server"]["cpu_s"] == pytest.approx(5.0)
    assert rows["exit"]["wall_s"] == pytest.approx(5.0) and rows["exit"]["cpu_s"] == pytest.approx(0.6)
    assert out["overhead_wall_share"] == pytest.approx((7 + 5 + 2.5 + 2) / 100)
    # Prefect's own CPU: the run flow's, less the functions and our own top-level work, plus its server's
    assert out["orchestration_cpu_s"] == pytest.approx(80 - (0.9 + 8 + 4 + 4.5) - 9 - 0.2 + 5.0)
    assert out["peak_rss_mb"] == pytest.approx(2.0)


@pytest.mark.slow
def test_bench_run_times_a_real_job_in_a_fresh_store(tmp_path, monkeypatch):
    from evosyn.flows.cli import main

    monkeypatch.setenv("PREFECT_HOME", PREFECT_HOME)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    out = tmp_path / "run.json"
    res = CliRunner().invoke(main, ["bench", "run", "--domain", "airline", "--rounds", "1", "--budget", "4",
                                    "--workdir", str(tmp_path / "w"), "--output", str(out)])
    assert res.exit_code == 0, res.output
    got = json.loads(out.read_text())
    rows = {r["part"]: r for r in got["rows"]}
    assert all(rows[s]["wall_s"] > 0 for s in ("design", "plan", "generate", "rollout", "verify", "train",
                                               "evaluate", "reflect", "imports", "test set", "tracking (mlflow)"))
    assert "1 calls" in rows["train"]["note"] and "3 calls" in rows["evaluate"]["note"]  # diagnostic + both test sets
    assert sum(r["wall_s"] for r in got["rows"] if r["group"] in ("start-up", "stages")) < got["wall_s"]
    assert got["cpu_s"] > got["cpu_self_s"] > 0 and 0 < got["overhead_wall_share"] < 1
    assert (tmp_path / "w" / "store" / "tables" / "runs").is_dir()  # the job wrote its rows to the fresh store
    assert "total" in res.output and "of wall" in res.output
    work = got["learner_work"]  # the job's own store, read back: both test sets and the diagnostic set
    store = Store(tmp_path / "w" / "store")
    assert work["evaluated_tasks"] == sum(store.count("evaluations", run_id=r) for r in store.runs()) > 0
    assert work["trained_trajectories"] > 0 and work["evaluate_cpu_ms_per_task"] > 0
    assert "tasks evaluated" in res.output


def test_learner_work_counts_evaluations_and_every_round_s_training_set(tmp_path):
    from evosyn.benchmarks.run import learner_work
    from evosyn.storage.records import Evaluation, Message, Run, SFTExample

    store = Store(tmp_path / "s")
    store.write([Run(run_id="r", round=0, domain="airline", rounds=2, budget=4)], "run")

    def example(rnd: int, i: int, split: str) -> SFTExample:
        return SFTExample(run_id="r", round=rnd, example_id=f"x{rnd}-{i}", task_id=f"t{rnd}-{i}",
                          trajectory_id=f"tr{rnd}-{i}", split=split, messages=[Message(role="user", content="hi")])

    def evaluation(rnd: int, i: int, task_set: str) -> Evaluation:
        return Evaluation(run_id="r", round=rnd, evaluation_id=f"e{rnd}-{task_set}-{i}", task_id=f"t{i}",
                          trajectory_id=f"te{rnd}-{task_set}-{i}", model_version="m", task_set=task_set,
                          success=True, reward=1.0)

    store.write([example(1, i, "train") for i in range(3)] + [example(1, 9, "diagnostic")], "sft-1")
    store.write([example(2, i, "train") for i in range(2)], "sft-2")
    store.write([evaluation(1, i, "test") for i in range(5)] + [evaluation(1, i, "diagnostic") for i in range(2)], "e1")
    store.write([evaluation(2, i, "test") for i in range(5)], "e2")
    # a test set's own run (no runs row) is not the job's learner work
    store.write([Evaluation(run_id="testset-x", round=1, evaluation_id="o", task_id="o", trajectory_id="o",
                            model_version="m", task_set="test", success=False, reward=0.0)], "other")
    work = learner_work(tmp_path / "s")
    assert work["evaluated_tasks"] == 12
    assert work["trained_trajectories"] == 3 + 5  # round 1 on its 3, round 2 on those and its own 2
    assert [(w["round"], w["trained_on"], w["evaluated"]) for w in work["per_round"]] == [(1, 3, 7), (2, 5, 5)]
