"""benchmarks/results.py: RESULTS.md is a function of the recorded JSON alone."""
import json

import pytest

from evosyn.benchmarks.results import RESULTS_DIR, SECTIONS, render

SYNTH = {"benchmark": "synth-airline",
         "machine": {"python": "3.11.7", "cpus": 2, "cpu_model": "Test CPU", "physical_cores": 2, "usable_cpus": 2,
                     "memory_gb": 8.0, "platform": "Linux", "when": "2026-01-02T03:04:05",
                     "load_average_start": [5.5, 4.0, 2.0], "load_average_end": [6.25, 4.0, 2.0],
                     "note": "shared CPUs"},
         "invocation": {"command": "evosyn bench synth --domain airline --n 500 --seed 0", "seeds": "0",
                        "seconds": 9.0},
         "domain": "airline", "blueprints": 500, "verified": 500, "seconds": 2.5, "cpu_seconds": 1.25,
         "verified_per_second": 200.0, "cpu_ms_per_verified": 3.0, "cpu_ms_per_verified_without_domain_load": 2.5,
         "item_cpu_ms_per_verified": 2.0, "stages": {"generate": 1.0, "verify": 1.5},
         "stage_cpu": {"generate": 0.5, "verify": 0.75}, "domain_load_seconds": 0.5, "domain_load_cpu_seconds": 0.25}


def write(folder, payload):
    folder.mkdir(exist_ok=True)
    (folder / f"{payload['benchmark']}.json").write_text(json.dumps(payload))
    return folder


def test_nothing_recorded_says_so_for_every_benchmark(tmp_path):
    text = render(tmp_path)
    assert text.count("Not yet measured on record.") == len(SECTIONS)
    assert "Command: `evosyn bench synth --n 500 --seed 0`." in text


def test_a_recorded_benchmark_shows_command_machine_seeds_spread_and_figures(tmp_path):
    text = render(write(tmp_path / "r", SYNTH))
    synth = text.split("## Synthesis throughput")[1].split("\n## ")[0]
    assert "Not yet measured" not in synth
    assert "- Command: `evosyn bench synth --domain airline --n 500 --seed 0`" in synth
    assert "- Recorded: 2026-01-02T03:04:05, 9 s wall" in synth
    assert ("- Machine: Test CPU, 2 logical CPUs (2 physical, 2 usable), 8.0 GB, Python 3.11.7, Linux; load "
            "average (1 min) 5.50 at start, 6.25 at end. Note: shared CPUs") in synth
    assert "- Seeds: 0" in synth and "- Spread: one pass, no repetition: no spread" in synth
    assert "**200.0 verified tasks/s**" in synth and "| verify | 1.50 | 0.75 | 1.50 |" in synth
    assert text.count("Not yet measured on record.") == len(SECTIONS) - 1


def test_a_changed_figure_changes_the_text(tmp_path):
    before = render(write(tmp_path / "a", SYNTH))
    after = render(write(tmp_path / "b", {**SYNTH, "verified_per_second": 123.4}))
    assert before != after and "**123.4 verified tasks/s**" in after


def test_the_same_json_gives_the_same_bytes(tmp_path):
    folder = write(tmp_path / "r", SYNTH)
    assert render(folder) == render(folder)


def test_a_benchmark_without_a_section_gets_one_of_its_scalars(tmp_path):
    text = render(write(tmp_path / "r", {"benchmark": "newbench", "calls": 3, "rate": 0.5, "nested": {"x": 1}}))
    assert "## newbench (`evosyn bench newbench`)" in text and "| calls | 3 |" in text and "| rate | 0.500 |" in text
    assert "nested" not in text


def test_every_committed_json_has_a_section():
    keys = {s.key for s in SECTIONS}
    for path in RESULTS_DIR.glob("*.json"):
        assert json.loads(path.read_text())["benchmark"].split("-")[0] in keys, path.name


@pytest.mark.parametrize("path", sorted(RESULTS_DIR.glob("*.json")), ids=lambda p: p.name)
def test_committed_json_records_the_machine_and_the_command(path):
    got = json.loads(path.read_text())
    assert got["machine"]["cpu_model"] and got["machine"]["load_average_start"]
    assert got["invocation"]["command"].startswith("evosyn bench ")
    assert f"--output benchmarks/results/{path.name}" in got["invocation"]["command"]


def test_an_llm_record_reads_through_the_benchmarks_own_rows(tmp_path):
    run = {"calls": 20, "concurrency": 8, "bound_calls_per_s": 4.0, "binding": "rpm", "steady_calls_per_s": 3.9,
           "wall_calls_per_s": 3.5, "of_bound": 0.975, "target": 0.95, "of_ideal": 0.99, "cold_http_requests": 22,
           "rate_limited": 2, "valid_outputs": 20, "failed_calls": 0, "client_cpu_ms_per_call": 1.5, "warm_s": 0.1,
           "warm_http_requests": 0, "warm_cache_hits": 20, "passed": True, "served_mean_latency_s": 1.4}
    text = render(write(tmp_path / "r", {"benchmark": "llm-openai_compatible", "machine": {}, "invocation": {},
                                         **run, "runs": [run]}))
    section = text.split("## LLM client")[1].split("\n## ")[0]
    assert "| 8 | cold cache | 4.00/s (rpm) |" in section and "97.5% (>= 95%)" in section
    assert "- PASS at concurrency 8: 97.5% of the bound" in section


def test_learning_and_discovery_records_show_intervals_and_seed_counts(tmp_path):
    row = {"set": "test", "n_tasks": 300, "round": 2, "arm": "evosyn", "mean": 0.5, "lo": 0.45, "hi": 0.55,
           "per_seed": {"0": 0.48, "1": 0.52}}
    paired = {"set": "test", "round": 2, "a": "evosyn", "b": "static", "mean": 0.02, "lo": -0.01, "hi": 0.05}
    folder = write(tmp_path / "r", {"benchmark": "learning-airline", "machine": {}, "invocation": {"seeds": "0-1"},
                                    "success": [row], "paired": [paired]})
    write(folder, {"benchmark": "discovery-airline", "machine": {}, "invocation": {},
                   "rows": [{"gap": "multi_item=yes", "arm": "no_feedback", "recovered": 1, "seeds": 3}]})
    text = render(folder)
    assert "| test | 300 | 2 | evosyn | 0.500 [0.450, 0.550] | 0.480 0.520 |" in text and "- Seeds: 0-1" in text
    assert "| test | 2 | evosyn - static | +0.020 [-0.010, +0.050] |" in text
    assert "| multi_item=yes | no_feedback | 1/3 |" in text
    assert text.count("Not yet measured on record.") == len(SECTIONS) - 2
    assert "No arm read a probe set (probe_size 0)." in text  # a recording without the key
    write(tmp_path / "r", {"benchmark": "learning-airline", "machine": {}, "invocation": {}, "probe_size": 200,
                           "success": [row]})
    assert "also read a probe set of 200 blueprints per round" in render(folder)


def test_a_second_recording_of_one_benchmark_is_told_apart_by_its_file(tmp_path):
    payload = {"benchmark": "discovery-airline", "machine": {}, "invocation": {}, "rows": []}
    folder = write(tmp_path / "r", payload)
    (folder / "discovery-airline-more-gaps.json").write_text(json.dumps(payload))
    text = render(folder)
    assert "### `discovery-airline`\n" in text
    assert "### `discovery-airline` (`discovery-airline-more-gaps.json`)\n" in text


def test_learning_records_show_the_adaptation_measures(tmp_path):
    adaptation = {"arm": "evosyn", "set": "test", "round": 2, "seeds": 5, "slices": 57, "spearman": 0.673,
                  "spearman_range": [0.632, 0.718], "targeted_improvement_rate": 0.905, "rate_range": [0.9, 0.9]}
    folder = write(tmp_path / "r", {"benchmark": "learning-airline", "machine": {}, "invocation": {}, "success": [],
                                    "adaptation": [adaptation]})
    assert "| evosyn | test | 2 | 5 | 57 | 0.673 [+0.63, +0.72] | 0.905 |" in render(folder)


def test_a_served_record_shows_adoption_per_arm_and_success_per_write_count(tmp_path):
    seed = {"seed": 0, "recovered": True, "round": 1, "rule": "failure-driven",
            "promoted": [{"factor": "num_write", "round": 1, "rule": "failure-driven"}]}
    folder = write(tmp_path / "r", {
        "benchmark": "served-airline", "machine": {}, "invocation": {}, "domain": "airline", "rounds": 3, "budget": 150,
        "test_size": 20, "probe_size": 150, "property": "num_write", "weak_buckets": ["2", "3-4", "5+"],
        "target": {"evosyn_at_least": 1, "no_feedback_at_most": 0}, "met": True,
        "rows": [{"arm": "evosyn", "recovered": 1, "seeds": 1, "per_seed": [seed]}],
        "success_by_bucket": {"1": {"evaluations": 10, "passed": 10, "success": 1.0},
                              "2": {"evaluations": 4, "passed": 0, "success": 0.0}},
        "agent": {"requests": 99, "misses": 0, "closed_before_a_write": 4}})
    text = render(folder)
    assert "| evosyn | 1/1 | s0:r1 failure-driven | num_write(1) |" in text and "**met**" in text
    assert "| 2 | 4 | 0.000 | yes |" in text and "| 1 | 10 | 1.000 | no |" in text
