"""The CLI as a user runs it: a real subprocess of the installed `evosyn` script."""
import json
import os
import subprocess
import sys

import pytest


def evosyn(*args, home, cwd=None):
    env = {**os.environ, "EVOSYN_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_help_lists_commands(tmp_path):
    out = evosyn("--help", home=tmp_path / "h")
    assert out.returncode == 0
    for cmd in ("config", "query"):
        assert cmd in out.stdout


def test_query_on_fresh_root_prints_zero_and_writes_nothing(tmp_path):
    out = evosyn("query", "select count(*) as n from verdicts", home=tmp_path / "h")
    assert out.returncode == 0, out.stderr
    assert "│ 0" in out.stdout
    assert not (tmp_path / "h").exists()


def test_query_formats(tmp_path, store):
    from tests.storage.samples import samples

    store.write([samples()["verdicts"]], "c")
    out = evosyn("query", "select verdict_id, reward from verdicts", "--format", "json", home=store.root)
    assert json.loads(out.stdout) == {"verdict_id": "v1", "reward": 1.0}
    target = tmp_path / "out.parquet"
    out = evosyn("query", "select * from verdicts", "--format", "parquet", "--output", str(target),
                 home=store.root)
    assert out.returncode == 0 and target.exists()


@pytest.mark.parametrize("sql", ["selec 1", "select * from no_such_table"])
def test_bad_sql_is_one_line_exit_2_and_writes_nothing(tmp_path, sql):
    target = tmp_path / "o.csv"
    out = evosyn("query", sql, "--format", "csv", "--output", str(target), home=tmp_path / "h")
    assert out.returncode == 2
    assert out.stderr.startswith("error: SQL:") and out.stderr.count("\n") == 1
    assert not target.exists() and not (tmp_path / "h").exists()


def test_config_validate(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("domain: retail\nrounds: 2\n")
    out = evosyn("config", "validate", str(good), home=tmp_path / "h")
    assert out.returncode == 0 and "domain: retail" in out.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("domain: retail\nrounds: -1\n")
    out = evosyn("config", "validate", str(bad), home=tmp_path / "h")
    assert out.returncode == 2 and "field 'rounds'" in out.stderr and out.stderr.count("\n") == 1
