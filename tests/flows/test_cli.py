"""The CLI as a user runs it: a real subprocess of the installed `evosyn` script."""
import json
import os
import subprocess
import sys

import pytest


def evosyn(*args, home, cwd=None):
    env = {**os.environ, "EVOSYN_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_help_lists_commands(tmp_path):
    out = evosyn("--help", home=tmp_path / "h")
    assert out.returncode == 0
    for cmd in ("config", "query"):
        assert cmd in out.stdout


@pytest.mark.parametrize("args", [("query", "select count(*) as n from verdicts"), ("runs",), ("show", "t1"),
                                  ("report", "r1"), ("store", "check")])
def test_a_reader_of_a_missing_store_root_says_so_in_one_line_and_writes_nothing(tmp_path, args):
    out = evosyn(*args, home=tmp_path / "h")
    assert out.returncode == 2 and out.stdout == ""
    (line,) = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert line.startswith("error:") and str(tmp_path / "h") in line and "no store" in line
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


def test_query_csv_writes_lists_structs_and_maps_as_json_text(tmp_path, store):
    """Arrow's CSV writer refuses nested columns and bytes that are not UTF-8 (it raised a traceback): they are
    written as text, nested ones as JSON."""
    import csv
    import io

    from tests.storage.samples import samples

    store.write([samples()["verdicts"]], "c")
    sql = ("select ['x', 'y'] as l, {'a': 1, 'b': [1, 2]} as s, map([1], ['x']) as m, NULL::int[] as n, "
           "2.5 as f, 'q\"uote' as t, map([]::int[], []::varchar[]) as em, [map([2], ['z'])] as lm, "
           "'\\xAA'::blob as b, '101'::bit as bt")
    target = tmp_path / "out.csv"
    for extra in ((), ("--output", str(target))):
        out = evosyn("query", sql, "--format", "csv", *extra, home=store.root)
        assert out.returncode == 0 and not out.stderr, out.stderr
        text = target.read_text() if extra else out.stdout
        assert list(csv.reader(io.StringIO(text))) == [
            ["l", "s", "m", "n", "f", "t", "em", "lm", "b", "bt"],
            ['["x", "y"]', '{"a": 1, "b": [1, 2]}', '{"1": "x"}', "", "2.5", 'q"uote', "{}", '[{"2": "z"}]',
             "b'\\xaa'", "b'\\x05\\xfd'"]]  # bytes as --format json writes them
    out = evosyn("query", "select * from verdicts", "--format", "csv", home=store.root)
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert out.returncode == 0 and len(rows) == 1 and json.loads(rows[0]["observed_num_write"]) == ["1"]


def test_query_limit_below_zero_is_refused(tmp_path):
    out = evosyn("query", "select 1", "--limit", "-1", home=tmp_path / "h")
    assert out.returncode == 2 and "--limit" in out.stderr


def test_a_column_pyarrow_refuses_is_one_line_naming_the_cast():
    import click
    import pyarrow as pa

    from evosyn.flows.cli import _arrow_error

    with pytest.raises(click.ClickException, match=r"^SQL: a result column cannot be converted \(Unsupported x\); "
                                                    r"cast it, e.g. col::VARCHAR$"):
        _arrow_error(pa.ArrowInvalid("Unsupported x\nmore"))
    _arrow_error(ValueError("not pyarrow's"))  # anything else is left to raise as it is


def test_query_table_shows_every_column_of_its_rows(tmp_path):
    (tmp_path / "h").mkdir()  # a store root, empty: constant SQL needs no table
    out = evosyn("query", "select 1 as a, 2 as a, 'x' as b union all select 3, 4, NULL", "--limit", "1",
                 home=tmp_path / "h")
    assert out.returncode == 0, out.stderr
    assert "│ 1 │ 2 │ x │" in out.stdout and "(2 rows, first 1 shown)" in out.stdout


@pytest.mark.parametrize("root", ["fresh", "written"])
def test_query_in_table_and_json_formats(tmp_path, store, root):
    """`evosyn query` in table and json formats: DuckDB's rows through the views of a fresh and a written root."""
    from tests.storage.samples import samples

    store.write([samples()["verdicts"]], "c")
    home = tmp_path / "h" if root == "fresh" else store.root
    home.mkdir(exist_ok=True)  # fresh: a root that exists and holds nothing yet
    code = ("import sys\nfrom evosyn.flows.cli import main\n"
            "for fmt in ('table', 'json'):\n"
            "    main(['query', 'select count(*) as n from verdicts', '--format', fmt], standalone_mode=False)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, "EVOSYN_HOME": str(home)})
    assert out.returncode == 0, out.stderr
    n = "0" if root == "fresh" else "1"
    assert f"│ {n} │" in out.stdout and f'{{"n": {n}}}' in out.stdout


@pytest.mark.parametrize("sql", ["selec 1", "select * from no_such_table"])
def test_bad_sql_is_one_line_exit_2_and_writes_nothing(tmp_path, sql):
    target = tmp_path / "o.csv"
    (tmp_path / "h").mkdir()
    out = evosyn("query", sql, "--format", "csv", "--output", str(target), home=tmp_path / "h")
    assert out.returncode == 2
    assert out.stderr.startswith("error: SQL:") and out.stderr.count("\n") == 1
    assert not target.exists() and list((tmp_path / "h").iterdir()) == []


def test_config_validate(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("domain: retail\nrounds: 2\n")
    out = evosyn("config", "validate", str(good), home=tmp_path / "h")
    assert out.returncode == 0 and "domain: retail" in out.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("domain: retail\nrounds: -1\n")
    out = evosyn("config", "validate", str(bad), home=tmp_path / "h")
    assert out.returncode == 2 and "field 'rounds'" in out.stderr and out.stderr.count("\n") == 1
