"""`evosyn bench learning`: its option parsing, its analysis of hand-made runs, and (slow) the real command."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from evosyn.benchmarks.learning import BenchInputError, Plan, analyze, parse_arms, parse_seeds
from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)


def test_seed_ranges_and_lists():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3") == [3]
    assert parse_seeds("0,2,5") == [0, 2, 5]
    assert parse_seeds("1-2,2-3") == [1, 2, 3]


@pytest.mark.parametrize("text, says", [("3-1", "ends before it starts"), ("x", "not a seed or a range"),
                                        ("-1", "not a seed or a range"), ("0-", "not a seed or a range"),
                                        ("", "not a seed or a range")])
def test_bad_seeds(text, says):
    with pytest.raises(BenchInputError, match=says):
        parse_seeds(text)


def test_arms():
    assert parse_arms("evosyn,static,evosyn") == ["evosyn", "static"]
    with pytest.raises(BenchInputError, match="unknown arm nope .*known arms: evosyn"):
        parse_arms("evosyn,nope")
    with pytest.raises(BenchInputError, match="no arm"):
        parse_arms(",")


def fake_run(arm, seed, rates, tasks=40, sets=("test", "test_uniform")):
    """A run whose round r solves the first ``rates[r-1] * tasks`` tasks of each set."""
    outcomes = {(ts, r): {f"t{i}": float(i < rate * tasks) for i in range(tasks)}
                for ts in sets for r, rate in enumerate(rates, 1)}
    rounds = [{"round": r, "factor_coverage": 0.5 + 0.1 * r, "factor_balance": 0.5, "interaction_coverage": 0.3,
               "trajectory_diversity": 0.6, "controllability": {"num_write": {"exact": 0.9, "spearman": 0.8,
                                                                           "n_requested": 10, "n_realized": 9}}
               if r > 1 and arm == "evosyn" else {}} for r in range(1, len(rates) + 1)]
    return {"arm": arm, "seed": seed, "promoted": ["num_write"] if arm == "evosyn" else [], "rounds": rounds,
            "_outcomes": outcomes}


def test_analysis_per_set_round_and_arm(tmp_path):
    plan = Plan(domain="airline", seeds=[0, 1], home=tmp_path, arms=["evosyn", "static"], rounds=2)
    runs = [fake_run("evosyn", s, [0.5, 0.75]) for s in (0, 1)] + [fake_run("static", s, [0.5, 0.5]) for s in (0, 1)]
    out = analyze(plan, runs, resamples=500)
    assert out["test_sets"] == {"test": 40, "test_uniform": 40}  # grouped by the sets the runs have
    cell = {(r["set"], r["round"], r["arm"]): r for r in out["success"]}
    assert len(cell) == 8 and cell[("test_uniform", 2, "evosyn")]["mean"] == pytest.approx(0.75)
    assert cell[("test", 2, "evosyn")]["per_seed"] == {"0": 0.75, "1": 0.75}
    diff = {(r["set"], r["round"]): r for r in out["paired"]}
    assert diff[("test", 1)]["mean"] == 0.0 and diff[("test", 1)]["lo"] <= 0.0 <= diff[("test", 1)]["hi"]
    # round 2: evosyn solves 10 more of 40 tasks in both seeds, the same ones: +0.25, its interval above 0
    assert diff[("test", 2)]["mean"] == pytest.approx(0.25) and diff[("test", 2)]["lo"] > 0
    assert (diff[("test", 2)]["a"], diff[("test", 2)]["b"]) == ("evosyn", "static")
    cov = {(r["arm"], r["round"], r["metric"]): r for r in out["intrinsic"]}
    assert cov[("static", 2, "factor_coverage")]["mean"] == pytest.approx(0.7)
    assert out["controllability"] == [{"factor": "num_write", "round": 2, "seeds": 2, "exact": 0.9, "spearman": 0.8,
                                       "n_requested": 20, "n_realized": 18}]


def test_analysis_pairs_only_the_tasks_every_run_has(tmp_path):
    plan = Plan(domain="airline", seeds=[0], home=tmp_path, arms=["evosyn", "static"], rounds=1)
    a, b = fake_run("evosyn", 0, [1.0], tasks=10), fake_run("static", 0, [0.0], tasks=12)
    out = analyze(plan, [a, b], resamples=200)
    assert out["test_sets"]["test"] == 10
    assert {r["n_tasks"] for r in out["success"]} == {10}
    assert all(np.isclose(r["mean"], 1.0) for r in out["paired"])


@pytest.mark.slow
def test_bench_learning_end_to_end(tmp_path, monkeypatch):
    """One seed, three arms, three rounds, tiny budgets: every arm runs every round (the stop rule would stop
    no_feedback after two unchanged rounds), the JSON has its fields, and a rerun reuses the runs."""
    from evosyn.flows.cli import main
    from evosyn.storage.store import Store

    monkeypatch.setenv("PREFECT_HOME", PREFECT_HOME)
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    monkeypatch.setenv("EVOSYN_SEED", "7")  # would override every run's config file: the benchmark drops it
    home, out = tmp_path / "h", tmp_path / "learning.json"
    args = ["bench", "learning", "--domain", "airline", "--seeds", "0", "--rounds", "3", "--budget", "12",
            "--test-size", "12", "--home", str(home), "--output", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output[-3000:]
    data = json.loads(out.read_text())
    assert data["benchmark"] == "learning-airline" and data["runs_launched"] == 3
    assert data["probe_size"] == 12  # the runs' default probe set: the round's budget, which evosyn read
    assert data["wall_s"] > 0 and data["cpu_s"] > 0 and data["resamples"] >= 2000
    assert sorted((r["arm"], r["seed"]) for r in data["runs"]) == [("evosyn", 0), ("no_feedback", 0), ("static", 0)]
    assert all("-s0-" in r["run_id"] for r in data["runs"])
    for r in data["runs"]:  # the same rounds for every arm, each evaluated on the shared test set
        assert [x["round"] for x in r["rounds"]] == [1, 2, 3], r["arm"]
        assert all("test" in x["success"] and "factor_coverage" in x for x in r["rounds"])
    store = Store(home, create=False)
    budgets = {r["arm"]: len(store.read_records("blueprints", run_id=r["run_id"])) for r in data["runs"]}
    assert len(set(budgets.values())) == 1, budgets  # the same total budget
    assert {(r["arm"], r["round"]) for r in data["success"] if r["set"] == "test"} == \
        {(a, n) for a in ("evosyn", "static", "no_feedback") for n in (1, 2, 3)}
    assert {(r["b"], r["round"]) for r in data["paired"] if r["set"] == "test"} == \
        {(b, n) for b in ("static", "no_feedback") for n in (1, 2, 3)}
    first = [r for r in data["paired"] if r["round"] == 1]
    assert all(r["mean"] == 0.0 for r in first)  # round 1 is the same for every arm of a seed
    assert {r["metric"] for r in data["intrinsic"]} == {"factor_coverage", "factor_balance", "interaction_coverage",
                                                         "trajectory_diversity"}
    assert "controllability" in data and "error" not in res.output
    # the last round's difference split by slice of the test set, from the tasks' observed factors
    assert {(r["set"], r["round"]) for r in data["slices"]["rows"]} >= {("test", 3)}
    assert {r["b"] for r in data["slices"]["rows"]} == {"static", "no_feedback"}
    assert "where the last round's paired difference comes from" in res.output
    # within-space adaptation per arm, set and round >= 2 (issue 43, item 3)
    assert {(a["arm"], a["round"]) for a in data["adaptation"] if a["set"] == "test"} <= \
        {(a, n) for a in ("evosyn", "static", "no_feedback") for n in (2, 3)}
    assert all(set(a) >= {"spearman", "targeted_improvement_rate", "per_seed"} for a in data["adaptation"])
    assert "within-space adaptation" in res.output or not data["adaptation"]
    # every arm adds at most one factor per round; the feedback arm as often as the control (issue 43, item 1)
    added = {}
    for r in data["runs"]:  # a round that kept the space stores it again, with its older diff
        spaces = sorted(store.read_records("spaces", run_id=r["run_id"]), key=lambda s: s.round)
        added[r["arm"]] = [sum(c.kind == "add_factor" for c in s.diff) if s.version != before.version else 0
                           for before, s in zip(spaces, spaces[1:])]
    assert all(n <= 1 for ns in added.values() for n in ns) and added["static"] == [0, 0, 0]
    probed = {r["arm"]: sum(e.task_set == "probe" for e in store.read_records("evaluations", run_id=r["run_id"]))
              for r in data["runs"]}
    assert probed["evosyn"] > 0 and probed["static"] == probed["no_feedback"] == 0, probed
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output[-3000:]
    assert json.loads(out.read_text())["runs_reused"] == 3


def test_bad_input_is_one_line_before_any_work(tmp_path):
    from evosyn.flows.cli import main

    for extra, says in ((["--seeds", "3-1"], "--seeds 3-1"), (["--arms", "evosyn,bogus"], "unknown arm bogus"),
                        (["--domain", "mars"], "--domain mars: unknown domain")):
        res = CliRunner().invoke(main, ["bench", "learning", "--home", str(tmp_path / "h"), *extra])
        assert res.exit_code == 2 and says in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "h").exists()
