"""Every input error of the CLI is one line `error: …` naming the path, exit code 2, and nothing written.

Input classes: a config (or space, or .env) file that is not UTF-8, unreadable, a folder or a broken
symlink; a store root that cannot be created (under a regular file, under /proc, a regular file itself,
a read-only folder); an output that cannot be written (under a file, under /proc, the wrong kind of
path); a run that is not in the store. Each case runs the real command through click's CliRunner
(one subprocess case checks the console entry point too) in a sandbox folder, and the sandbox must be
unchanged afterwards: no store root created, no output file, no partial folder.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evosyn.flows.cli import main  # the entry point: importing it attaches every command

AS_ROOT = os.geteuid() == 0
# root reads and writes whatever the mode bits say: the folder, broken-symlink and /proc cases cover
# the same code paths there
needs_non_root = pytest.mark.skipif(AS_ROOT, reason="root ignores file modes")

RUN_CFG = "domain: airline\nrounds: 1\nbudget: 4\ntest_size: 4\n"
SWEEP_CFG = RUN_CFG + "sweep:\n  domains: [airline]\n  arms: [evosyn]\n  seeds: [0]\n"
NOT_UTF8 = b"domain: airline\n# caf\xe9 in Latin-1\nrounds: 1\n"


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A folder with every kind of bad path, a store holding run ``run-a``, and the cwd set to it."""
    from evosyn.storage.store import Store
    from tests.storage.samples import samples

    t = tmp_path / "sb"
    t.mkdir()
    (t / "file").write_text("a regular file\n")
    (t / "dir").mkdir()
    (t / "broken").symlink_to(t / "nowhere")
    (t / "latin1.yaml").write_bytes(NOT_UTF8)
    (t / "run.yaml").write_text(RUN_CFG)
    (t / "sweep.yaml").write_text(SWEEP_CFG)
    Store(t / "store").write([samples()["runs"]], "run")  # run id "run-a"
    (t / "svc").mkdir()
    (t / "svc" / "services.json").write_bytes(b'{"prefect": {"pid": \xff')  # a torn, non-UTF-8 services.json
    if not AS_ROOT:
        (t / "locked.yaml").write_text(RUN_CFG)
        (t / "locked.yaml").chmod(0)
        (t / "readonly").mkdir()
        (t / "readonly").chmod(0o555)
    monkeypatch.chdir(t)  # ./.env, ./.evosyn and ./bench-results are looked for here
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    yield t
    for p in (t / "locked.yaml", t / "readonly"):
        if p.exists():
            p.chmod(0o755)


def snapshot(root: Path) -> dict[str, int | None]:
    """Every path under ``root`` (not following links) with its size; folders and links as None."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = p.lstat().st_size if p.is_file() and not p.is_symlink() else None
    return out


def P(*args, home="{t}/fresh", needles=(), marks=(), id=None):
    return pytest.param(list(args), home, needles, marks=marks, id=id)


CONFIG_FILES = [("not-utf8", "{t}/latin1.yaml", "not UTF-8"), ("folder", "{t}/dir", "a folder"),
                ("broken-symlink", "{t}/broken", "broken symlink"), ("missing", "{t}/absent.yaml", "no such file")]
BAD_ROOTS = [("under-file", "{t}/file/home", "{t}/file is a file"), ("is-file", "{t}/file", "{t}/file"),
             ("under-proc", "/proc/evosyn-home", "/proc"),
             ("broken-symlink", "{t}/broken", "{t}/broken")]
BAD_OUT_FILES = [("under-file", "{t}/file/out.json", "{t}/file is a file"),
                 ("under-proc", "/proc/evosyn-out.json", "/proc"), ("is-folder", "{t}/dir", "a folder")]
BAD_OUT_DIRS = [("under-file", "{t}/file/out", "{t}/file is a file"), ("under-proc", "/proc/evosyn-out", "/proc"),
                ("is-file", "{t}/file", "{t}/file is a file")]

CASES = [
    # config files: `config validate`, `run --config`, `sweep --config`
    *[P(*cmd, path, needles=(path, why), id=f"{cmd[0]}-config-{name}")
      for cmd in (["config", "validate"], ["run", "--config"], ["sweep", "--config"])
      for name, path, why in CONFIG_FILES],
    *[P(*cmd, "{t}/locked.yaml", needles=("{t}/locked.yaml", "cannot read"), marks=needs_non_root,
        id=f"{cmd[0]}-config-unreadable") for cmd in (["config", "validate"], ["run", "--config"])],
    # a synthesis space file
    *[P("synth", "--n", "2", "--space", path, needles=(path, why), id=f"synth-space-{name}")
      for name, path, why in CONFIG_FILES],
    # store roots that cannot be created, for every command that writes the store
    *[P(*cmd, home=root, needles=(needle,), id=f"{cmd[0]}{'-' + cmd[1] if cmd[0] == 'bench' else ''}-root-{name}")
      for cmd in (["run", "--config", "{t}/run.yaml"], ["sweep", "--config", "{t}/sweep.yaml"], ["synth", "--n", "2"],
                  ["bench", "synth", "--n", "2"], ["bench", "learner", "--sizes", "0"], ["up"])
      for name, root, needle in BAD_ROOTS],
    P("run", "--config", "{t}/run.yaml", home="{t}/readonly/home", needles=("{t}/readonly",), marks=needs_non_root,
      id="run-root-readonly"),
    P("query", "select 1", home="{t}/file", needles=("{t}/file",), id="query-root-is-file"),
    P("train", "--run", "run-a", "--round", "1", home="{t}/file", needles=("{t}/file",), id="train-root-is-file"),
    # outputs that cannot be written
    *[P("query", "select 1", "--format", "csv", "--output", out, needles=(out, why), id=f"query-output-{name}")
      for name, out, why in BAD_OUT_FILES],
    *[P("export", "--run", "run-a", "--format", "openai", "--output", out, home="{t}/store", needles=(out, why),
        id=f"export-output-{name}") for name, out, why in BAD_OUT_DIRS],
    *[P("report", "run-a", "--output", out, home="{t}/store", needles=(out, why), id=f"report-output-{name}")
      for name, out, why in BAD_OUT_DIRS],
    *[P("compare", "run-a", "--output", out, home="{t}/store", needles=(out, why), id=f"compare-output-{name}")
      for name, out, why in BAD_OUT_DIRS],
    P("report", "run-a", home="{t}/file/store", needles=("{t}/file",), id="report-root-under-file"),
    *[P("bench", bench, *extra, "--output", out, home="{t}/store", needles=(out, why), id=f"bench-{bench}-output-{name}")
      for bench, extra in (("verify", ["--limit", "1"]), ("llm", ["--calls", "1"]), ("synth", ["--n", "2"]),
                           ("learner", ["--sizes", "0"]))
      for name, out, why in BAD_OUT_FILES],
    # the default bench-results/ folder, when ./bench-results is a file
    P("bench", "llm", "--calls", "1", needles=("bench-results",), id="bench-llm-default-output-blocked"),
    # runs that are not in the store: say so, name the root looked in and how to point at another
    *[P(*cmd, home="{t}/store", needles=("nope", "{t}/store", "--home", "EVOSYN_HOME"), id=f"{cmd[0]}-unknown-run")
      for cmd in (["export", "--run", "nope", "--format", "openai", "--output", "{t}/out"],
                  ["report", "nope"], ["compare", "run-a", "nope"], ["run", "--resume", "nope"],
                  ["train", "--run", "nope", "--round", "1"], ["evaluate", "--run", "nope", "--round", "1"])],
    P("export", "--run", "nope", "--format", "openai", "--output", "{t}/out", needles=("{t}/fresh", "--home"),
      id="export-unknown-run-no-store"),
    # the services.json `evosyn up` keeps, torn
    *[P(cmd, home="{t}/svc", needles=("{t}/svc/services.json", "unreadable"), id=f"{cmd}-services-json-torn")
      for cmd in ("up", "down", "deploy")],
]


def _fill(value: str, t: Path) -> str:
    return value.replace("{t}", str(t))


@pytest.mark.parametrize(("args", "home", "needles"), CASES)
def test_input_error_is_one_line_exit_2_and_writes_nothing(sandbox, args, home, needles):
    if "bench-results" in needles:
        (sandbox / "bench-results").write_text("in the way\n")
    before = snapshot(sandbox)
    result = CliRunner().invoke(main, [_fill(a, sandbox) for a in args], env={"EVOSYN_HOME": _fill(home, sandbox)})
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert _fill(needle, sandbox) in lines[0], lines[0]
    assert snapshot(sandbox) == before
    assert not Path(_fill(home, sandbox)).is_dir() or home in ("{t}/store", "{t}/svc")


@pytest.mark.parametrize("command", [["envs", "list"], ["query", "select 1"]])
def test_a_dotenv_that_is_not_utf8_is_one_line(sandbox, command):
    (sandbox / ".env").write_bytes(b"OPENAI_API_KEY=caf\xe9\n")
    result = CliRunner().invoke(main, command, env={"EVOSYN_HOME": str(sandbox / "fresh")})
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: invalid .env file .env: not UTF-8")


def test_the_console_entry_point_prints_one_line(sandbox):
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "EVOSYN_HOME": str(sandbox / "file" / "home"),
           "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    before = snapshot(sandbox)
    for args in (["config", "validate", "latin1.yaml"], ["synth", "--n", "2"]):
        done = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True, env=env,
                              cwd=sandbox, timeout=120, check=False)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert snapshot(sandbox) == before


def test_a_writable_output_still_works(sandbox):
    out = sandbox / "new" / "deeper" / "rows.csv"
    (sandbox / "fresh").mkdir()
    result = CliRunner().invoke(main, ["query", "select 1 as one", "--format", "csv", "--output", str(out)],
                                env={"EVOSYN_HOME": str(sandbox / "fresh")})
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines() == ['"one"', "1"]
    assert list((sandbox / "fresh").iterdir()) == [] and not list(sandbox.glob(".evosyn-probe-*"))


def _console(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    repo = str(Path(__file__).resolve().parents[2])
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120, check=False)


def test_an_unknown_run_from_another_folder_names_the_store_it_looked_in(sandbox, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "EVOSYN_HOME"}
    before = snapshot(sandbox)
    # the default ./.evosyn of another folder: the line says where that is, absolute, and how to look elsewhere
    done = _console(["report", "run-a"], elsewhere, env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: run run-a: no such run") and f"no store at {elsewhere}/.evosyn" in line, line
    assert "--home DIR" in line and "EVOSYN_HOME=DIR" in line, line
    # a relative --home is named as the absolute folder it is, with the nearest run ids of that store
    done = _console(["--home", "../sb/store", "export", "--run", "run-b", "--format", "openai",
                     "--output", str(elsewhere / "out")], elsewhere, env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: --run run-b: no such run"), line
    assert f"the store at {elsewhere}/../sb/store has 1 run; nearest: run-a" in line, line
    assert snapshot(sandbox) == before and list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("command", [["train", "--run", "run-a", "--round", "1"], ["report", "run-a"],
                                     ["evaluate", "--run", "run-a", "--round", "1"]])
def test_an_unknown_run_in_an_empty_store_says_the_store_has_no_runs(sandbox, command):
    from evosyn.storage.store import Store

    Store(sandbox / "empty")  # a store folder with no run yet
    result = CliRunner().invoke(main, command, env={"EVOSYN_HOME": str(sandbox / "empty")})
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"(the store at {sandbox}/empty has no runs)" in result.stderr, result.stderr


def test_an_unknown_run_lists_a_few_known_ids_when_none_is_near(sandbox):
    result = CliRunner().invoke(main, ["report", "zzzzzzzz"], env={"EVOSYN_HOME": str(sandbox / "store")})
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"(the store at {sandbox}/store has 1 run: run-a)" in result.stderr, result.stderr
    assert "nearest" not in result.stderr
