"""`evosyn new-domain`: the template pack, as written, goes through envs check, verify, synth and a 1-round run;
a pack with no official tasks runs on the uniform set; an incomplete pack is one line before any work (a broken
one, and `verify` of your own files: tests/flows/test_cli_envs.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)


def evosyn(*args: str, packs: Path, home: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """The real CLI in a working directory of its own, with ``packs`` as the user's pack folder."""
    env = {**os.environ, "EVOSYN_HOME": str(home), "EVOSYN_DOMAINS": str(packs), "PREFECT_HOME": PREFECT_HOME,
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True, env=env,
                          cwd=packs.parent, timeout=timeout)


def new_domain(tmp_path: Path, name: str) -> tuple[Path, Path]:
    packs = tmp_path / "packs"
    out = evosyn("new-domain", name, packs=packs, home=tmp_path / "h")
    assert out.returncode == 0, out.stderr[-2000:]
    assert sorted(p.name for p in (packs / name).iterdir()) == sorted(
        ["__init__.py", "pack.py", "environment.py", "policy.py", "generator.py", "ontology.json"])
    return packs, packs / name


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def test_new_domain_refuses_bad_names_and_existing_folders(tmp_path):
    packs, _ = new_domain(tmp_path, "gym_names")
    for name, why in [("Gym", "lower-case Python identifier"), ("class", "lower-case Python identifier"),
                      ("airline", "exists already"), ("gym_names", "exists already")]:
        out = evosyn("new-domain", name, packs=packs, home=tmp_path / "h")
        assert out.returncode == 2 and why in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_the_template_checks_clean_verifies_and_synthesizes(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_demo")
    home = tmp_path / "h"
    out = evosyn("envs", "check", "gym_demo", packs=packs, home=home)
    assert out.returncode == 0 and "gym_demo: errors 0, warnings 1" in out.stdout, out.stdout + out.stderr
    out = evosyn("envs", "list", packs=packs, home=home)
    assert "gym_demo" in out.stdout.split() and "airline" in out.stdout.split()
    out = evosyn("verify", "--domain", "gym_demo", "--official", packs=packs, home=home)
    assert out.returncode == 0 and re.search(r"passed\W+2\b", out.stdout), out.stdout + out.stderr
    out = evosyn("synth", "--domain", "gym_demo", "--n", "20", "--seed", "0", "--quiet", packs=packs, home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    q = evosyn("query", "select count(*) as n, count(distinct observed_task_family[1]) as families, count(*) "
                        "filter (where observed_task_family[1] = 'unknown') as unknown, count(*) filter (where "
                        "len(observed_tool_use_pattern) > 0) as patterned, count(*) filter (where "
                        "observed_policy_gated[1] != '0') as gated from verdicts where passed", "--format", "json",
               packs=packs, home=home)
    row = json.loads(q.stdout)
    # every blueprint verified (no refusal it cannot build), both families, and the facts the pack's settings
    # record: a family for every task, tool-use patterns, policy-gated writes
    assert row["n"] == 20 and row["families"] == 2 and row["unknown"] == 0, row
    assert row["patterned"] == 20 and row["gated"] > 0, row


RUN = "domain: {name}\nrounds: 1\nbudget: 20\nseed: 0\ntest_size: 20\nchunk_size: 10\n"


@pytest.mark.slow
def test_a_one_round_run_on_the_template(tmp_path):
    packs, _ = new_domain(tmp_path, "gym_run")
    (tmp_path / "run.yaml").write_text(RUN.format(name="gym_run"))
    out = evosyn("run", "--config", str(tmp_path / "run.yaml"), "--quiet", packs=packs, home=tmp_path / "h",
                 timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "test set official-matched: 20 tasks" in out.stderr + out.stdout
    q = evosyn("query", "select task_set, count(*) as n from evaluations group by all order by 1", "--format",
               "json", packs=packs, home=tmp_path / "h")
    sets = {r["task_set"]: r["n"] for r in map(json.loads, q.stdout.splitlines())}  # JSON lines
    assert sets["test"] == 20 and sets["test_uniform"] == 20, sets


@pytest.mark.slow
def test_a_domain_without_official_tasks_runs_on_the_uniform_set(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_none")
    edit(folder / "environment.py", "OFFICIAL = [", "OFFICIAL = []\n_UNUSED = [")
    out = evosyn("envs", "check", "gym_none", packs=packs, home=tmp_path / "h")
    assert out.returncode == 0 and "warning: official tasks: none" in out.stdout, out.stdout
    (tmp_path / "run.yaml").write_text(RUN.format(name="gym_none"))
    out = evosyn("run", "--config", str(tmp_path / "run.yaml"), "--quiet", packs=packs, home=tmp_path / "h",
                 timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    said = out.stderr + out.stdout
    assert "test set official-matched: skipped: the gym_none domain has no official tasks; the uniform set is this " \
           "domain's test set" in said, said
    q = evosyn("query", "select task_set, count(*) as n from evaluations group by all order by 1", "--format",
               "json", packs=packs, home=tmp_path / "h")
    # and its Reflector read the default probe set of the domain's uniform builder
    assert {json.loads(line)["task_set"] for line in q.stdout.splitlines()} == {"diagnostic", "probe", "test_uniform"}
    summary = json.loads(next((tmp_path / "h").glob("summary-*.json")).read_text())
    assert "success_test" not in summary["rounds"][0] and "success_test_uniform" in summary["rounds"][0]


@pytest.mark.parametrize("setting, change, command", [
    ("controllable", ("controllable = {", "controllable = {}\n    _unused = {"), "run"),
    ("task_builder", ("    def task_builder(self, domain, prior):", "    def _unused(self, domain, prior):"), "synth"),
    ("ontology.json", None, "synth"),
    ("tools", ('Tool(book_class, "write"', 'Tool(book_class, "change"'), "synth"),
])
def test_an_incomplete_pack_is_one_line_before_any_work(tmp_path, setting, change, command):
    packs, folder = new_domain(tmp_path, "gym_bad")
    if change is None:
        (folder / "ontology.json").unlink()
    else:
        edit(folder / ("environment.py" if setting == "tools" else "pack.py"), *change)
    args = (["run", "--domain", "gym_bad", "--rounds", "1", "--budget", "20"] if command == "run"
            else ["synth", "--domain", "gym_bad", "--n", "5"])
    out = evosyn(*args, packs=packs, home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr[-2000:]
    assert out.stderr.startswith(f"error: --domain gym_bad: {setting}: "), out.stderr
    assert not (tmp_path / "h").exists()  # before any work: not even the store
    check = evosyn("envs", "check", "gym_bad", packs=packs, home=tmp_path / "h")  # what a run needs: all errors
    assert check.returncode == 1 and f"error: {setting}: " in check.stdout, check.stdout + check.stderr


def test_a_missing_policy_is_no_rules_and_a_warning(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_free")
    (folder / "policy.py").unlink()
    out = evosyn("envs", "check", "gym_free", packs=packs, home=tmp_path / "h")
    assert out.returncode == 0 and "warning: policy.py: none" in out.stdout, out.stdout
    out = evosyn("synth", "--domain", "gym_free", "--n", "6", "--quiet", packs=packs, home=tmp_path / "h")
    assert out.returncode == 0, out.stderr[-2000:]
