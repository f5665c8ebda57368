"""`evosyn sweep` ends with the comparison; `evosyn compare` and `report --compare` share one pattern union (slow)."""
import json
import math

import pytest

from tests.flows.test_run import run

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

pytestmark = pytest.mark.slow

SWEEP = ("domain: airline\nrounds: 2\nbudget: 12\nseed: 0\ntest_size: 8\nchunk_size: 6\n"
         "sweep:\n  domains: [airline]\n  arms: [evosyn, static]\n  seeds: [0]\n")


def cli(home, *args):
    """Commands without Prefect run in-process (saves an interpreter start per call)."""
    from click.testing import CliRunner

    from evosyn.flows import cli_run  # noqa: F401  (attaches compare / report to main)
    from evosyn.flows.cli import main

    res = CliRunner().invoke(main, ["--home", str(home), *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_sweep_compare_and_report_share_one_union(tmp_path):
    from evosyn.storage.metrics import trajectory_diversity
    from evosyn.storage.store import Store
    from evosyn.tasks.metrics import verified_samples

    home = tmp_path / "h"
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(SWEEP)
    out, _ = run(home, "sweep", "--config", str(cfg))
    assert "runs x rounds" in out and "final round, mean over seeds" in out  # the sweep prints the comparison
    store = Store(home, create=False)
    ids = store.runs()
    assert len(ids) == 2
    cli(home, "compare", *ids, "--output", str(tmp_path / "cmp"))
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    rows = result["rows"]
    assert sorted((r["arm"], r["round"]) for r in rows) == [("evosyn", 1), ("evosyn", 2), ("static", 1), ("static", 2)]
    # one union: the patterns of both runs, all rounds, and every row's diversity is normalized by it
    union = {s["pattern"] for rid in ids for s in verified_samples(store, rid)}
    assert set(result["pattern_union"]["airline"]) == union
    for r in rows:
        pats = [s["pattern"] for s in verified_samples(store, r["run_id"], r["round"])]
        assert r["verified"] == len(pats)
        assert r["trajectory_diversity_union"] == pytest.approx(trajectory_diversity(pats, union))
        assert r["trajectory_diversity"] == pytest.approx(trajectory_diversity(pats, set(pats)))  # the run summary's
        for key in ("factor_coverage", "factor_balance", "interaction_coverage", "trajectory_diversity",
                    "trajectory_diversity_union"):
            assert 0.0 <= r[key] <= 1.0
    # size-matched support: the larger final pool is subsampled to the smaller one
    n = result["size_matched_n"]["airline"]
    finals = [r for r in rows if r["final"]]
    assert n == min(r["verified"] for r in finals)
    assert all(r["distinct_size_matched"] <= r["distinct_tool_sequences"] for r in finals)
    assert {m["arm"] for m in result["arm_means"]} == {"evosyn", "static"}
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert md.count("| airline-") == 4
    # report --compare shows the same shared-union numbers
    cli(home, "report", ids[0], "--compare", ids[1], "--output", str(tmp_path / "rep"))
    summary = (tmp_path / "rep" / "summary.md").read_text()
    assert "## Comparison" in summary
    for r in rows:
        assert f"{r['trajectory_diversity_union']:.3f}" in summary and f"{r['trajectory_diversity']:.3f}" in summary
    assert set(result["legend"]) >= {"trajectory_diversity", "trajectory_diversity_union", "gap_allocation_spearman"}
    assert all(math.isfinite(r["success_test"]) for r in rows)
