"""Hostile inputs a user hands the CLI, each one `error:` line, exit 2, naming the file or option and the fix:
`verify`'s task and trajectory (nested 100,000 levels deep, an integer of 5,000 digits, 224 MB read whole), a seed
no seeded library takes (`run`, `synth`, `preview`), a config key written twice."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evosyn.flows.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "own-domain"  # a valid task and conversation
HUGE_SEED = "100000000000000000000000"


def evosyn(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env={"EVOSYN_HOME": str(tmp_path / "h"), **(env or {})})


def one_line(result) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("name, text, says", [
    ("deep.json", "[" * 100_000 + "]" * 100_000, "nested more than 100 levels deep (flatten it)"),
    ("bigint.json", '{"id": ' + "1" * 5000 + "}", "an integer of 5000 digits (at most 4300; write it as a string)"),
    ("twice.json", '{"id": "0", "id": "1"}', "duplicate key 'id' (keep one)"),
])
@pytest.mark.parametrize("option", ["--task", "--trajectory"])
def test_verify_refuses_json_it_cannot_read_in_one_line(tmp_path, name, text, says, option):
    bad = tmp_path / name
    bad.write_text(text)
    files = {"--task": str(EXAMPLE / "task.json"), "--trajectory": str(EXAMPLE / "conversation.json"), option: str(bad)}
    result = evosyn(tmp_path, "verify", "--domain", "airline", *(x for kv in files.items() for x in kv))
    assert one_line(result) == f"error: {option} {bad}: {says}"


def test_verify_refuses_a_trajectory_over_the_size_limit_before_reading_it(tmp_path):
    big = tmp_path / "conversation.json"
    with open(big, "wb") as f:  # sparse: 224 MB by its size, nothing on disk
        f.truncate(224 * 10**6)
    start = time.monotonic()
    result = evosyn(tmp_path, "verify", "--domain", "airline", "--task", str(EXAMPLE / "task.json"),
                    "--trajectory", str(big))
    assert time.monotonic() - start < 30  # read whole, it took 79 s
    assert one_line(result) == (f"error: --trajectory {big}: 224.0 MB, over the 64 MB limit of an input file (pass a "
                                "smaller file, or raise the limit with EVOSYN_MAX_INPUT_MB=MB)")
    small = tmp_path / "task.json"
    small.write_text(json.dumps({"id": "0", "padding": "x" * 3000}))
    result = evosyn(tmp_path, "verify", "--domain", "airline", "--task", str(small), "--trajectory",
                    str(EXAMPLE / "conversation.json"), env={"EVOSYN_MAX_INPUT_MB": "0.002"})
    assert "over the 0.002 MB limit" in one_line(result)


@pytest.mark.parametrize("args", [["run", "--domain", "airline", "--rounds", "1", "--budget", "2"],
                                  ["synth", "--domain", "airline", "--n", "2"],
                                  ["preview", "--domain", "airline", "--n", "1"]])
def test_a_seed_no_seeded_library_takes_is_one_line_and_writes_nothing(tmp_path, args):
    result = evosyn(tmp_path, *args, "--seed", HUGE_SEED)
    line = one_line(result)
    assert "seed" in line and HUGE_SEED in line and "4294967295" in line, line
    assert not (tmp_path / "h").exists()


def test_a_config_key_written_twice_is_one_line_with_its_line(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("domain: airline\nrounds: 1\nseed: 1\nbudget: 2\nseed: 2\n")
    result = evosyn(tmp_path, "config", "validate", str(cfg))
    assert one_line(result) == f"error: invalid config {cfg}: duplicate key 'seed' at line 5 (keep one)"
