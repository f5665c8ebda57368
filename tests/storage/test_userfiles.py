"""Files a user names, read with one line for each way they can be wrong: too large (refused before reading),
nested too deep, an integer too long, NaN, duplicate keys (JSON and YAML)."""
from __future__ import annotations

import time

import pytest

from evosyn.storage.userfiles import (MAX_INPUT_MB_ENV, MAX_JSON_DEPTH, ConfigError, read_json_file, read_text_file,
                                      read_yaml_file)


def refused(call, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        call(*args, **kwargs)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.delenv(MAX_INPUT_MB_ENV, raising=False)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: 224 MB on paper, no disk and nothing to read until someone reads it
        f.truncate(224 * 10**6)
    start = time.monotonic()
    msg = refused(read_json_file, big, prefix=f"--trajectory {big}")
    assert time.monotonic() - start < 1.0
    assert msg == (f"--trajectory {big}: 224.0 MB, over the 64 MB limit of an input file (pass a smaller file, or "
                   f"raise the limit with {MAX_INPUT_MB_ENV}=MB)")
    monkeypatch.setenv(MAX_INPUT_MB_ENV, "0.001")  # the limit is the variable's: 1,000 bytes
    (tmp_path / "small.yaml").write_text("rounds: 1\n" * 200)
    assert "2.0 KB, over the 0.001 MB limit" in refused(read_text_file, tmp_path / "small.yaml")
    monkeypatch.setenv(MAX_INPUT_MB_ENV, "lots")
    assert refused(read_text_file, tmp_path / "small.yaml") == (
        f"{MAX_INPUT_MB_ENV}=lots: not a number of megabytes (e.g. {MAX_INPUT_MB_ENV}=256)")


@pytest.mark.parametrize("text, says", [
    ("[" * 100_000 + "]" * 100_000, f"nested more than {MAX_JSON_DEPTH} levels deep (flatten it)"),
    ("[" * 500 + "]" * 500, f"nested more than {MAX_JSON_DEPTH} levels deep (flatten it)"),
    ('{"id": ' + "1" * 5000 + "}", "an integer of 5000 digits (at most 4300; write it as a string)"),
    ('{"x": NaN}', "NaN is not JSON (write a number or null)"),
    ('{"x": 1e999}', "1e999 is too large for a number"),
    ('{"id": 1, "id": 2}', "duplicate key 'id' (keep one)"),
    ('{"id": 1,}', "not valid JSON (Expecting property name enclosed in double quotes at line 1 column 10)"),
])
def test_bad_json_is_one_line_naming_the_file(tmp_path, text, says):
    path = tmp_path / "task.json"
    path.write_text(text)
    assert refused(read_json_file, path, prefix=f"--task {path}") == f"--task {path}: {says}"


def test_json_within_the_limits_reads_as_json(tmp_path):
    path = tmp_path / "ok.json"
    deep = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    path.write_text('{"id": "[[[[", "n": ' + "9" * 300 + ', "deep": ' + deep[2:-2] + "}")
    data = read_json_file(path, prefix="--task")
    assert data["id"] == "[[[[" and data["n"] == int("9" * 300)


@pytest.mark.parametrize("text, says", [
    ("rounds: 1\nbudget: 3\nrounds: 2\n", "duplicate key 'rounds' at line 3 (keep one)"),
    ("roles:\n  planner: {model: a, backend: llm, model: b}\n", "duplicate key 'model' at line 2 (keep one)"),
])
def test_a_yaml_key_twice_is_refused_with_its_line(tmp_path, text, says):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    assert refused(read_yaml_file, path) == f"invalid config {path}: {says}"


def test_yaml_merge_keys_and_distinct_keys_read_as_before(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("base: &b {rounds: 1}\nrun:\n  <<: *b\n  budget: 3\nyes: 1\n")
    assert read_yaml_file(path) == {"base": {"rounds": 1}, "run": {"rounds": 1, "budget": 3}, True: 1}
