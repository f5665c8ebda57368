"""`evosyn bench sweep`'s figures: the table, the one-line summary and its RESULTS.md section (the sweeps
themselves run in tests/flows/test_sweep_workers.py, on the same stack)."""
import json

from evosyn.benchmarks.results import render
from evosyn.benchmarks.sweep import rows, summary

RESULT = {"benchmark": "sweep", "grid": {"domains": ["airline", "telecom"], "arms": ["evosyn", "static"],
                                         "seeds": [0, 1], "rounds": 1, "budget": 24, "test_size": 20},
          "runs": 8, "workers": 2, "serial": {"wall_s": 300.0, "cpu_s": 250.5, "server_cpu_s": 20.0},
          "on_workers": {"wall_s": 200.0, "cpu_s": 280.25, "server_cpu_s": 30.0}, "speedup": 1.5,
          "ideal_speedup": 2, "rows_equal": True, "tables_differing": [], "workdir": None}


def test_the_table_has_both_ways_and_the_summary_the_speedup_and_the_rows_verdict():
    assert rows(RESULT) == [["serial (one process)", "300.0", "250.5", "20.0"], ["2 workers", "200.0", "280.2", "30.0"]]
    line = summary(RESULT)
    assert line.startswith("8 runs (airline, telecom x evosyn, static x seeds 0, 1; 1 round(s), budget 24): "
                           "speed-up 1.50x on 2 workers")
    assert "(ideal here at most 2x)" in line and line.endswith("rows equal to the serial sweep's")
    differ = summary({**RESULT, "rows_equal": False, "tables_differing": ["tasks", "verdicts"]})
    assert differ.endswith("rows DIFFER from the serial sweep's in tasks, verdicts")


def test_results_md_has_a_sweep_section(tmp_path):
    assert "Not yet measured on record. Command: `evosyn bench sweep`." in render(tmp_path)
    (tmp_path / "sweep.json").write_text(json.dumps(RESULT))
    section = render(tmp_path).split("## Sweeps over workers (`evosyn bench sweep`)")[1].split("\n## ")[0]
    assert "speed-up 1.50x on 2 workers" in section and "| 2 workers | 200.0 | 280.2 | 30.0 |" in section


def test_an_s3_pass_adds_its_two_ways_and_its_rows_verdict():
    s3 = {"serial": {"wall_s": 330.0, "cpu_s": 260.0, "server_cpu_s": 21.0},
          "on_workers": {"wall_s": 220.0, "cpu_s": 290.0, "server_cpu_s": 31.0}, "speedup": 1.5, "rows_equal": True,
          "serial_differing": [], "workers_differing": [], "root": "s3://b/p/bench-sweep-1"}
    got = {**RESULT, "s3": s3}
    assert rows(got)[2:] == [["S3 store: serial (one process)", "330.0", "260.0", "21.0"],
                             ["S3 store: 2 workers", "220.0", "290.0", "31.0"]]
    assert summary(got).endswith("; on the S3 store: speed-up 1.50x, rows equal to the local serial sweep's")
    bad = {**got, "s3": {**s3, "rows_equal": False, "workers_differing": ["tasks"]}}
    assert summary(bad).endswith("rows DIFFER from the local serial sweep's in tasks")
