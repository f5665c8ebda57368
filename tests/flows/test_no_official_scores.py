"""A domain of one's own with no official tasks: its runs are scored on the uniform test set, and every place that
shows a score says so (the round line, the final summary, `evosyn runs`, `evosyn compare`, the report and its charts,
MLflow), each score with the share of training tasks that copy test-set tasks; `verify --official` says there is
nothing to verify (issue 59, items 1 and 2)."""
from __future__ import annotations

import json
import math
import re

import pytest

from tests.flows.test_cli_new_domain import edit, evosyn, new_domain

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

RUN = "domain: {name}\nrounds: 2\nbudget: 30\nseed: 0\ntest_size: 30\nchunk_size: 10\n"


def test_verify_official_of_a_domain_with_no_official_tasks_is_one_line(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_unofficial")
    edit(folder / "environment.py", "OFFICIAL = [", "OFFICIAL = []\n_UNUSED = [")
    out = evosyn("verify", "--domain", "gym_unofficial", "--official", packs=packs, home=tmp_path / "h")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [x for x in out.stderr.splitlines() if not x.endswith("No .env file found")]
    assert lines == ["error: gym_unofficial has no official tasks (its environment's tasks() lists none); verify "
                     "your own with --task FILE --trajectory FILE"], out.stderr
    assert out.stdout == ""


@pytest.fixture(scope="module")
def uniform_run(tmp_path_factory):
    """One run of the template with its official tasks removed: (packs, home, run id, what the run printed)."""
    tmp = tmp_path_factory.mktemp("unofficial")
    packs, folder = new_domain(tmp, "gym_uniform")
    edit(folder / "environment.py", "OFFICIAL = [", "OFFICIAL = []\n_UNUSED = [")
    (tmp / "run.yaml").write_text(RUN.format(name="gym_uniform"))
    home = tmp / "h"
    out = evosyn("run", "--config", str(tmp / "run.yaml"), packs=packs, home=home, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    run_id = json.loads(next(home.glob("summary-*.json")).read_text())["run_id"]
    return packs, home, run_id, out.stdout + out.stderr


@pytest.mark.slow
def test_the_round_line_and_the_summary_show_the_uniform_score_with_its_overlap(uniform_run):
    from evosyn.tasks.overlap import OVERLAP_WARN

    _, home, run_id, said = uniform_run
    assert " nan" not in said, said
    rounds = json.loads((home / f"summary-{run_id}.json").read_text())["rounds"]
    lines = said.splitlines()
    for m in rounds:
        r, score, share = m["round"], m["success_test_uniform"], m["overlap_test_uniform"]
        assert m["success_test_scored"] == score and "success_test" not in m
        assert "overlap_test" not in m  # no official-matched set: nothing to overlap with, not a 0
        assert m["overlap_test_sets"] == share and m["overlap_trained"] > 0
        line = next(x for x in lines if x.startswith(f"round {r}: verified"))
        assert f"test (uniform) {score:.3f} (overlap {share:.0%})" in line, line
        # a warning line follows the round's line when the share is above the threshold (tests/tasks/test_overlap.py)
        assert any(x.startswith(f"warning: round {r}: ") for x in lines) == (share > OVERLAP_WARN), said
        # the final summary: the test score marked uniform, the overlap beside it
        row = next(x for x in lines if re.match(rf"^│ {r} ", x))
        assert f"{score:.3f} (uniform)" in row and f"{share:.0%}" in row, row


@pytest.mark.slow
def test_runs_and_compare_show_the_uniform_score_and_its_overlap(uniform_run):
    from evosyn.tasks.overlap import OVERLAP_WARN

    packs, home, run_id, _ = uniform_run
    metrics = json.loads((home / f"summary-{run_id}.json").read_text())["rounds"][-1]
    out = evosyn("runs", "--format", "json", packs=packs, home=home)
    row = next(r for r in json.loads(out.stdout)["runs"] if r["run_id"] == run_id)
    assert (row["test_success"], row["test_set"], row["test_round"]) == (metrics["success_test_uniform"], "uniform", 2)
    assert row["test_overlap"] == pytest.approx(metrics["overlap_test_sets"])
    out = evosyn("runs", packs=packs, home=home)
    line = next(x for x in out.stdout.splitlines() if run_id in x)
    assert f"{metrics['success_test_uniform']:.3f} (uniform, round 2)" in line, out.stdout
    assert f"{metrics['overlap_test_sets']:.0%}" in line, out.stdout
    assert (f"warning: {run_id}: " in out.stdout) == (metrics["overlap_test_sets"] > OVERLAP_WARN), out.stdout
    out = evosyn("compare", run_id, "--output", str(home / "cmp"), packs=packs, home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads((home / "cmp" / "compare.json").read_text())
    r = result["rows"][-1]
    assert r["success_test_scored"] == metrics["success_test_uniform"] and r["test_set_scored"] == "uniform"
    assert r["success_test"] is None and r["overlap_test_uniform"] == pytest.approx(metrics["overlap_test_uniform"])
    assert result["uniform_scored"] == ["gym_uniform"] and "its test score is the uniform test set's" in out.stdout


@pytest.mark.slow
def test_the_report_charts_the_uniform_set(uniform_run):
    packs, home, run_id, _ = uniform_run
    out = evosyn("report", run_id, packs=packs, home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    md = (home / "reports" / run_id / "summary.md").read_text()
    page = (home / "reports" / run_id / "report.html").read_text()
    assert "test scores are the uniform set's, test (uniform)" in md
    head = next(x for x in md.splitlines() if x.startswith("| round | verified"))
    assert "| uniform test success | uniform test overlap | test set scored |" in head, head
    slices = md.split("## Per-slice test success")[1].split("##")[0]
    assert re.search(r"\| num_write \| \d \| [01]\.\d{3} \|", slices), slices  # rows of the uniform set, not empty
    # the per-slice figure is drawn (of the uniform set): an empty one was drawn before, with no caption's set
    assert "per-slice success over rounds" in page and "(test (uniform) set)" in page
    from evosyn.storage.store import Store
    from evosyn.tasks.reports.data import arm_success
    from evosyn.tasks.reports.html import success_plot

    arms = arm_success(Store(home, create=False), [run_id])
    assert {a["task_set"] for a in arms} == {"test_uniform", "diagnostic"}
    assert success_plot(arms)  # two panels (no empty official-matched one)


@pytest.mark.slow
def test_mlflow_has_the_uniform_score_and_the_overlap(uniform_run):
    from mlflow.tracking import MlflowClient

    from evosyn.storage.tracking import EXPERIMENT, default_tracking_uri

    _, home, run_id, _ = uniform_run
    metrics = json.loads((home / f"summary-{run_id}.json").read_text())["rounds"][0]
    client = MlflowClient(tracking_uri=default_tracking_uri(home))
    exp = client.get_experiment_by_name(EXPERIMENT)
    (child,) = client.search_runs([exp.experiment_id], "tags.`evosyn.round` = '1'")  # round 1's
    m = child.data.metrics
    assert m["success_test_scored"] == pytest.approx(metrics["success_test_uniform"])
    assert child.data.params["test_set_scored"] == "uniform"
    assert m["overlap_test_uniform"] == pytest.approx(metrics["overlap_test_uniform"]) and "overlap_test" not in m
    assert not any(math.isnan(v) for v in m.values())


def test_the_final_summary_warns_under_its_table_when_the_last_round_trained_on_copies(capsys):
    from types import SimpleNamespace

    from evosyn.flows.cli_run import print_summary

    base = {"verified_yield": 1.0, "success_diagnostic": 0.8, "factor_coverage": 0.5, "factor_balance": 0.5,
            "interaction_coverage": 0.5, "trajectory_diversity": 0.5, "diff": "no change"}
    rounds = [{**base, "round": 1, "success_test_uniform": 0.9, "overlap_test_uniform": 0.36,
               "overlap_test_sets": 0.36, "overlap_trained": 198.0, "overlap_flagged": 72.0},
              {**base, "round": 2, "success_test": 0.46, "success_test_uniform": 0.5, "overlap_test_sets": 0.05,
               "overlap_test": 0.05, "overlap_trained": 400.0, "overlap_flagged": 20.0}]
    print_summary(SimpleNamespace(run_id="r", seconds=1.0, rounds=rounds))
    out = capsys.readouterr().out
    one, two = (next(x for x in out.splitlines() if x.startswith(f"│ {r} ")) for r in (1, 2))
    assert "0.900 (uniform)" in one and "36%" in one and "0.460 " in two and "(uniform)" not in two and "5%" in two
    assert "warning" not in out  # the last round (5%) is under the threshold
    print_summary(SimpleNamespace(run_id="r", seconds=1.0, rounds=rounds[:1]))
    assert "warning: 36% of the training tasks (72 of 198) are near copies of test-set tasks" in capsys.readouterr().out
