"""`evosyn bench results`: the committed RESULTS.md is what the command writes from the committed JSON."""
import json
import shutil

from click.testing import CliRunner

from evosyn.benchmarks.results import RESULTS_DIR, RESULTS_MD
from evosyn.flows.cli import main


def results(*args):
    return CliRunner().invoke(main, ["bench", "results", *map(str, args)])


def test_the_command_reproduces_the_committed_file_byte_for_byte(tmp_path):
    out = tmp_path / "RESULTS.md"
    res = results("--output", out)
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == RESULTS_MD.read_bytes(), "benchmarks/RESULTS.md is stale: run `evosyn bench results`"
    assert results("--check").exit_code == 0


def test_a_changed_json_changes_the_output(tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(RESULTS_DIR, folder)
    path = folder / "synth-airline.json"
    payload = json.loads(path.read_text())
    payload["verified_per_second"] = 98765.4
    path.write_text(json.dumps(payload))
    out = tmp_path / "RESULTS.md"
    assert results("--input", folder, "--output", out).exit_code == 0
    assert out.read_bytes() != RESULTS_MD.read_bytes() and "98765.4 verified tasks/s" in out.read_text()
    check = results("--input", folder, "--check")  # the committed file no longer matches this JSON
    assert check.exit_code == 1 and "out of date" in check.output


def test_a_file_that_is_not_a_benchmarks_json_is_one_line(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"no": "benchmark"}))
    res = results("--input", tmp_path, "--output", tmp_path / "R.md")
    assert res.exit_code == 2 and res.output.startswith("error: --input") and res.output.count("\n") == 1
    res = results("--input", tmp_path / "missing", "--output", tmp_path / "R.md")
    assert res.exit_code == 2 and "not a folder" in res.output
