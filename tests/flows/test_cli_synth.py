import json
import os
import signal
import subprocess
import sys

import pytest

from evosyn.envs.packs import get_domain
from evosyn.storage.digest import table_digests
from evosyn.storage.faults import ENV
from evosyn.storage.store import Store
from tests.flows.test_cli import evosyn


def test_synth_writes_the_store_and_prints_yield(tmp_path):
    home = tmp_path / "h"
    out = evosyn("synth", "--domain", "airline", "--n", "24", "--seed", "2", home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "24 of 24 blueprints verified" in out.stdout and "flight_cancellation" in out.stdout
    q = evosyn("query", "select count(*) as n from tasks where run_id = 'synth-airline-s2-n24'", "--format", "json",
               home=home)
    assert json.loads(q.stdout) == {"n": 24}
    for table in ("directions", "blueprints", "trajectories", "verdicts"):
        q = evosyn("query", f"select count(*) as n from {table}", "--format", "json", home=home)
        assert json.loads(q.stdout)["n"] > 0


@pytest.mark.parametrize("domain,family", [("retail", "exchange_delivered_order"), ("telecom", "billing_issue")])
def test_every_domain_synthesizes_and_reports_requested_vs_realized(tmp_path, domain, family):
    home = tmp_path / "h"
    out = evosyn("synth", "--domain", domain, "--n", "36", "--seed", "1", "--factor", "num_write", home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    assert family in out.stdout and "num_write: requested vs realized" in out.stdout
    line = next(line for line in out.stdout.splitlines() if line.startswith("num_write: ") and "requests exact" in line)
    of_requests, of_generated = line.split(": ")[1].split(" ")[0], line.split("), ")[-1].split(" ")[0]
    (exact, requested), (exact_g, generated) = (map(int, x.split("/")) for x in (of_requests, of_generated))
    assert generated >= 30 and exact_g == exact == generated  # re-derived from each replay, before the gate
    assert requested == 36 >= generated  # every blueprint requested a value; one that became no task is a miss
    q = evosyn("query", "select count(distinct domain) as d, min(domain) as name from tasks", "--format", "json",
               home=home)
    assert json.loads(q.stdout) == {"d": 1, "name": domain}
    wrong = evosyn("synth", "--domain", domain, "--n", "3", "--factor", "nope", home=tmp_path / "other")
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: --factor nope:") and not (tmp_path / "other").exists()


def test_bad_space_file_is_one_line(tmp_path):
    bad = tmp_path / "space.json"
    bad.write_text(json.dumps({"factors": [{"key": "task_family", "values": []}]}))
    out = evosyn("synth", "--n", "3", "--space", str(bad), home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.startswith("error: --space") and out.stderr.count("\n") == 1
    assert not (tmp_path / "h").exists()


def test_unknown_domains_are_refused_clearly(tmp_path):
    out = evosyn("synth", "--domain", "bank", "--n", "3", home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("error: --domain bank: unknown domain (known domains: airline, ")
    assert not (tmp_path / "h").exists()
    # car_bench, an environment family of its own, synthesizes like the tau2 packs
    out = evosyn("synth", "--domain", "car_bench", "--n", "3", "--quiet", home=tmp_path / "h")
    assert out.returncode == 0 and "3 of 3 blueprints verified" in out.stdout


def _synth_killed_at(point, home, *args):
    env = {**os.environ, "EVOSYN_HOME": str(home), ENV: point}
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "synth", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("point", ["plan", "rollout", "verify"])
def test_a_killed_synth_resumes_to_the_rows_of_an_uninterrupted_one(tmp_path, point):
    args = ("--n", "20", "--seed", "1", "--chunk-size", "6")
    run_id = "synth-airline-s1-n20"
    assert evosyn("synth", *args, home=tmp_path / "clean").returncode == 0
    killed = _synth_killed_at(point, tmp_path / "killed", *args)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-1000:]
    resumed = evosyn("synth", *args, home=tmp_path / "killed")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "20 of 20 blueprints verified" in resumed.stdout  # the whole pass, also what ran before the kill
    want = table_digests(Store(tmp_path / "clean", create=False), run_id)
    assert table_digests(Store(tmp_path / "killed", create=False), run_id) == want


def test_a_run_id_holding_another_pass_is_refused_in_one_line(tmp_path):
    home = tmp_path / "h"
    assert evosyn("synth", "--n", "4", "--run-id", "mine", home=home).returncode == 0
    assert evosyn("synth", "--n", "4", "--run-id", "mine", home=home).returncode == 0  # the same pass: a no-op
    out = evosyn("synth", "--n", "5", "--run-id", "mine", home=home)
    assert out.returncode == 2 and out.stderr.startswith("error: --run-id mine:") and out.stderr.count("\n") == 1


def test_synth_runs_the_llm_roles_of_a_run_config(tmp_path):
    """The same backends as a round: roles.<role> of a run config, checked first, their calls in llm_calls."""
    from evosyn.benchmarks.fake_llm_server import FakeLLMServer
    from evosyn.benchmarks.llm_script import RoleScript
    from tests.flows.test_llm_run import KEY, cli, config

    home = tmp_path / "home"
    missing = cli(home, "synth", "--n", "4", "--backend", "llm", "--config",
                  str(config(tmp_path, "http://127.0.0.1:9/v1")), key=None, timeout=120)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and missing.stderr.count("\n") == 1
    assert not home.exists()  # refused before any work
    with FakeLLMServer(RoleScript(get_domain("airline"))) as server:
        out = cli(home, "synth", "--n", "4", "--backend", "llm", "--config", str(config(tmp_path, server.base_url)),
                  timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "blueprints verified" in out.stdout and server.count > 0
    store = Store(home, create=False)
    (run_id,) = {c.run_id for c in store.read_records("llm_calls")}
    assert run_id.startswith("synth-airline-s0-n4-llm")  # its own run id: never an embedded pass's partition
    assert {c.role for c in store.read_records("llm_calls")} >= {"designer", "planner", "generator", "teacher"}
    assert KEY not in "".join(p.read_bytes().decode("latin-1") for p in home.rglob("*") if p.is_file())


def test_the_test_sets_run_id_namespace_is_refused(tmp_path):
    out = evosyn("synth", "--n", "4", "--run-id", "testset-uniform-airline-g1-s20260101-n300", home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.startswith("error: --run-id testset-") and out.stderr.count("\n") == 1
    out = evosyn("synth", "--n", "4", "--run-id", "probeset-uniform-airline-g1-s7000001-n300", home=tmp_path / "h")
    assert out.returncode == 2 and "probeset-" in out.stderr and out.stderr.count("\n") == 1
