"""`evosyn bench synth`, `verify`, `learner` (benchmarks/cli_stages.py)."""
import json

import pytest

from tests.flows.test_cli import evosyn


def test_bench_synth_recomputes_the_pass_and_reports_cpu_per_verified_task(tmp_path):
    home, out = tmp_path / "h", tmp_path / "synth.json"
    for _ in range(2):  # the second run deletes the first's pass first: all of it is computed again
        done = evosyn("bench", "synth", "--domain", "airline", "--n", "12", "--output", str(out), home=home)
        assert done.returncode == 0, done.stderr[-2000:]
        got = json.loads(out.read_text())
        assert got["verified"] == 12 and got["stage_cpu"]["generate"] > 0 and got["stage_cpu"]["verify"] > 0
        # the domain's load is timed apart, before the pass: beside the pass's total, and in the per-task figure
        assert got["domain_load_cpu_seconds"] > 0
        assert got["cpu_ms_per_verified"] == pytest.approx(
            1000 * (got["cpu_seconds"] + got["domain_load_cpu_seconds"]) / 12)
        assert got["cpu_ms_per_verified_without_domain_load"] == pytest.approx(1000 * got["cpu_seconds"] / 12)
        assert 0 < got["item_cpu_ms_per_verified"] < got["cpu_ms_per_verified_without_domain_load"]
    assert "ms CPU per verified task" in done.stdout and "domain load (once per process" in done.stdout


def test_bench_verify_writes_json(tmp_path):
    target = tmp_path / "bench.json"
    out = evosyn("bench", "verify", "--domain", "airline", "--limit", "3", "--output", str(target), home=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(target.read_text())
    assert data["tasks"] == 3 and data["agreeing_rewards"] == 3 and data["speedup"] > 1


def test_bench_verify_on_a_family_without_an_evaluator_compares_with_the_replay_floor(tmp_path):
    """CAR-bench: its own split by default (it has no ``base``), and no evaluator of its own installed: our verifier
    against the replay floor, the gold trajectories' rewards named, no tau2 column; a split it lacks is one line."""
    target = tmp_path / "bench.json"
    out = evosyn("bench", "verify", "--domain", "car_bench", "--limit", "3", "--output", str(target), home=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(target.read_text())
    assert data["split"] == "test" and data["tasks"] == 3 and data["evaluator"] is None
    assert data["gold_reward_1"] == {"verifier": 3, "verifier_gold_replayed": 3} and data["agreeing_rewards"] is None
    assert set(data["per_task"]) == {"verifier", "verifier_gold_replayed", "replay_floor"} and data["floor_share"] > 0
    assert "vs replay floor" in out.stdout and "tau2" not in out.stdout
    out = evosyn("bench", "verify", "--domain", "car_bench", "--split", "base", home=tmp_path)
    assert out.returncode == 2 and out.stderr.startswith("error: --split base: not a split of car_bench")
    assert out.stderr.count("\n") == 1


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
    # peak resident memory of the process (a Python process with the learner loaded is well over 50 MiB)
    assert 50 < empty["peak_rss_mib"] <= trained["peak_rss_mib"] == data["largest"]["peak_rss_mib"]
    assert "peak RSS MiB" in out.stdout and "peak resident memory" in out.stdout


def test_bench_learner_without_a_test_task_is_a_one_line_error(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import evosyn.tasks.testset as testset
    from evosyn.flows.cli import main

    monkeypatch.setattr(testset, "test_cases", lambda *args, **kwargs: [])  # a generator that builds no test task
    out = CliRunner().invoke(main, ["--home", str(tmp_path / "h"), "bench", "learner", "--domain", "airline",
                                    "--sizes", "0", "--test-size", "4", "--ablation-size", "0"])
    assert out.exit_code == 2
    assert "--test-size 4: the airline generator built no official-matched test task" in out.output
