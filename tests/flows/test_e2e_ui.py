"""The deployed stack as a user sees it: `evosyn up`, `evosyn deploy`, a run through the Prefect API,
its stage tasks, stage logs and artifacts in the Prefect UI and its runs in the MLflow UI (headless Chromium),
`evosyn down`.

Needs the Debian packages ``chromium`` and ``chromium-driver`` and the ``selenium`` package (dev extra).
Without them the test is skipped, unless ``EVOSYN_REQUIRE_E2E`` is set (CI), where it fails.
Screenshots go to ``$EVOSYN_TEST_ARTIFACTS`` (default: the test's tmp dir).
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
STAGES = ("design", "plan", "generate", "rollout", "verify", "evaluate", "reflect")
RUN_CFG = {"domain": "airline", "arm": "evosyn", "rounds": 1, "budget": 20, "test_size": 20, "seed": 3,
           "train_deployment": "sft-train/sft-train"}


def _browser_or_skip():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (pip install -e '.[dev]')")
    if missing:
        why = f"headless browser missing: {', '.join(missing)} (apt-get install chromium chromium-driver)"
        if os.environ.get("EVOSYN_REQUIRE_E2E"):
            pytest.fail(why + "; EVOSYN_REQUIRE_E2E is set")
        pytest.skip(why)


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: every socket stays bound until all are picked (one at a time, the kernel
    can hand out the same port twice, and Prefect and MLflow then collide on it)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def cli(env, *args, timeout=300):
    done = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"evosyn {' '.join(args)} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout + done.stderr


def api(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


class Page:
    """A headless Chromium that waits for an SPA to render the texts a test expects."""

    def __init__(self, shots: Path):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1500,1100", "--no-first-run", "--disable-extensions"):
            opts.add_argument(arg)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        self.shots = shots

    def text(self) -> str:
        return self.driver.find_element("tag name", "body").text

    def wait_for(self, needles, name: str, timeout: float = 60.0, scroll_to: str | None = None) -> str:
        deadline = time.monotonic() + timeout
        while True:
            body = self.text()
            missing = [n for n in needles if not (n.search(body) if isinstance(n, re.Pattern) else n in body)]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if scroll_to and not missing:  # bring the evidence into the screenshot
            el = self.driver.find_elements("xpath", f"//*[normalize-space(text())='{scroll_to}']")
            if el:
                self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", el[0])
                time.sleep(0.3)
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))
        assert not missing, f"{name}: not on the page after {timeout:.0f}s: {missing}; page text: {body[:1500]}"
        return body

    def open(self, url: str, needles, name: str, scroll_to: str | None = None) -> str:
        self.driver.get(url)
        return self.wait_for(needles, name, scroll_to=scroll_to)

    def click_text(self, label: str) -> None:
        # the innermost element whose whole text is the label (tabs wrap their label in spans)
        el = self.driver.find_elements("xpath", f"//*[normalize-space(.)='{label}']"
                                                f"[not(*[normalize-space(.)='{label}'])]")[0]
        self.driver.execute_script("arguments[0].click();", el)

    def close(self) -> None:
        self.driver.quit()


def test_deployed_run_in_prefect_and_mlflow_uis(tmp_path):
    _browser_or_skip()
    from evosyn.flows.services import alive, family, load_state, port_free

    home = tmp_path / "home"
    shots = Path(os.environ.get("EVOSYN_TEST_ARTIFACTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    pport, mport = free_ports(2)
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_WORKER_QUERY_SECONDS": "2",
           # the workers import the flows of this checkout, not of some other installed copy
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    t0 = time.monotonic()
    out = cli(env, "up", "--prefect-port", str(pport), "--mlflow-port", str(mport), "--pool", "cpu", "--pool", "gpu")
    prefect_url, mlflow_url = f"http://127.0.0.1:{pport}", f"http://127.0.0.1:{mport}"
    try:
        assert prefect_url in out and mlflow_url in out
        state = load_state(home)
        assert set(state) == {"prefect", "mlflow", "worker-cpu", "worker-gpu"}
        again = cli(env, "up", "--prefect-port", str(pport), "--mlflow-port", str(mport), "--pool", "cpu",
                    "--pool", "gpu")
        assert again.count("already running") == 4 and "started" not in again
        assert {k: s.pid for k, s in load_state(home).items()} == {k: s.pid for k, s in state.items()}
        t_up = time.monotonic() - t0

        cli(env, "deploy")
        inspect = subprocess.run([sys.executable, "-m", "prefect", "deployment", "inspect",
                                  "evosyn-sweep/evosyn-sweep"], env={**env, "PREFECT_API_URL": f"{prefect_url}/api"},
                                 capture_output=True, text=True, timeout=60, check=False)
        assert "'cron': '0 3 * * 1'" in inspect.stdout and "'active': False" in inspect.stdout, inspect.stdout

        dep = api(f"{prefect_url}/api/deployments/name/evosyn-run/evosyn-run")
        assert dep["work_pool_name"] == "cpu"
        run = api(f"{prefect_url}/api/deployments/{dep['id']}/create_flow_run", {"parameters": {"cfg": RUN_CFG}})
        deadline = time.monotonic() + 300
        while (state_ := api(f"{prefect_url}/api/flow_runs/{run['id']}")["state"])["type"] not in \
                ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            assert time.monotonic() < deadline, f"flow run still {state_['type']} after 300s"
            time.sleep(2)
        assert state_["type"] == "COMPLETED", f"{state_}; worker log: {home / 'logs' / 'worker-cpu.log'}"
        t_run = time.monotonic() - t0 - t_up

        rounds = api(f"{prefect_url}/api/flow_runs/filter", {"flows": {"name": {"any_": ["evosyn-round"]}}})
        trains = api(f"{prefect_url}/api/flow_runs/filter", {"flows": {"name": {"any_": ["sft-train"]}}})
        assert len(rounds) == 1 and rounds[0]["state"]["type"] == "COMPLETED"
        # the round trained through the sft-train deployment on the gpu pool, not in-process
        assert len(trains) == 1 and trains[0]["state"]["type"] == "COMPLETED"
        assert trains[0]["work_pool_name"] == "gpu" and trains[0]["parameters"]["round"] == 1
        run_id = trains[0]["parameters"]["run_id"]

        # the round published its metrics table and its report markdown to its own flow run, the run a summary
        def artifacts_of(flow_run_id):
            found = api(f"{prefect_url}/api/artifacts/filter",
                        {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})
            return {a["key"]: a for a in found}

        on_round, on_run = artifacts_of(rounds[0]["id"]), artifacts_of(run["id"])
        metrics_key, report_key = f"round-1-metrics-{run_id}", f"round-1-report-{run_id}"
        assert set(on_round) == {metrics_key, report_key}, on_round.keys()
        assert on_round[metrics_key]["type"] == "table" and on_round[report_key]["type"] == "markdown"
        table = on_round[metrics_key]["data"]
        table = json.loads(table) if isinstance(table, str) else table
        assert {"success_test", "verified_yield", "space_version"} <= {row["metric"] for row in table}
        report_md = on_round[report_key]["data"]
        for section in ("## Stages", "## Space", "## Reflector", "**Decision:**", "## Designer"):
            assert section in report_md, section
        assert set(on_run) == {f"run-summary-{run_id}"} and on_run[f"run-summary-{run_id}"]["type"] == "table"
        logs = [entry["message"] for entry in api(f"{prefect_url}/api/logs/filter",
                                                  {"logs": {"flow_run_id": {"any_": [rounds[0]["id"]]}}})]
        assert any(re.fullmatch(r"verify: \d+/\d+ kept(; rejected: .+)?", m) for m in logs), logs

        exp = api(f"{mlflow_url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=evosyn")["experiment"]
        found = api(f"{mlflow_url}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment_id"]]})["runs"]
        by_name = {r["info"]["run_name"]: r for r in found}
        assert set(by_name) == {run_id, f"{run_id}/round-1"}
        round_run = by_name[f"{run_id}/round-1"]["info"]["run_id"]

        page = Page(shots)
        try:
            page.open(f"{prefect_url}/runs/flow-run/{run['id']}", [run["name"], "evosyn-run", "Completed", "cpu"],
                      "prefect-run")
            page.click_text("Subflow Runs")
            page.wait_for([rounds[0]["name"], "evosyn-round"], "prefect-run-subflows")
            page.open(f"{prefect_url}/runs/flow-run/{rounds[0]['id']}", [rounds[0]["name"], run["name"]],
                      "prefect-round")
            page.click_text("Task Runs")
            page.wait_for([re.compile(rf"\b{s}-[0-9a-f]{{3}}\b") for s in STAGES], "prefect-round-task-runs")
            page.click_text("Artifacts")
            page.wait_for([metrics_key, report_key], "prefect-round-artifacts")
            page.open(f"{prefect_url}/artifacts/artifact/{on_round[report_key]['id']}",
                      [f"Round 1 of {run_id}", "Stages", "Reflector", "Designer"], "prefect-round-report-artifact")

            # the parent row (its round nested under it): both runs match
            page.open(f"{mlflow_url}/#/experiments/{exp['experiment_id']}/runs", [run_id, "2 matching runs"],
                      "mlflow-experiment")
            page.open(f"{mlflow_url}/#/experiments/{exp['experiment_id']}/runs/{round_run}",
                      [f"{run_id}/round-1", "Parent run", "space_version", "success_test", "factor_coverage"],
                      "mlflow-round-run", scroll_to="space_version")
            page.open(f"{mlflow_url}/#/experiments/{exp['experiment_id']}/runs/{round_run}/artifacts",
                      ["spaces", "reflections", "directions.json"], "mlflow-round-artifacts")
        finally:
            page.close()
        t_ui = time.monotonic() - t0 - t_up - t_run
    finally:
        recorded = {s.pid for s in load_state(home).values()}
        everything = family(recorded) | recorded
        down = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "down"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=120, check=False)
    assert down.returncode == 0, down.stderr
    assert everything and not [p for p in everything if alive(p)], "processes of ours survived `evosyn down`"
    assert not family(recorded) and port_free(pport) and port_free(mport)
    assert not (home / "services.json").exists()
    print(f"up {t_up:.0f}s, deploy+run {t_run:.0f}s, UI checks {t_ui:.0f}s; screenshots in {shots}")
