"""The deployed stack on PostgreSQL: three `evosyn up --db` of three store roots started at once against one
fresh database (tests/postgres_server.py), `evosyn deploy` and a run through the deployment on one of them,
the run's MLflow records read back through another root's MLflow server (they share the database), no
password in any file the stacks wrote, and `evosyn down` leaving no process of theirs.

The headless-browser checks of the same stack on sqlite are tests/flows/test_e2e_ui.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.flows.test_e2e_ui import REPO, api, cli, free_ports

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
RUN_CFG = {"domain": "airline", "arm": "evosyn", "rounds": 1, "budget": 10, "test_size": 10, "seed": 5}
STACKS = 3


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_WORKER_QUERY_SECONDS": "2",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for var in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "EVOSYN_DB"):
        env.pop(var, None)
    return env


def test_three_stacks_start_at_once_on_one_postgresql_and_run_a_deployment(pg_server, tmp_path):
    from evosyn.agents.servers import stop as stop_process
    from evosyn.flows.services import alive, family, load_state, port_free

    db = pg_server.database("stack")
    password = db.split(":")[2].split("@")[0]
    homes = [tmp_path / f"home{i}" for i in range(STACKS)]
    ports = free_ports(2 * STACKS)
    urls = [(f"http://127.0.0.1:{ports[2 * i]}", f"http://127.0.0.1:{ports[2 * i + 1]}") for i in range(STACKS)]

    def up(i: int) -> str:
        # the URL through EVOSYN_DB, as a team passes it (never on a command line `ps` shows); a generous health
        # timeout: the three take turns on the schema lock, beside the other xdist worker's tests
        return cli({**_env(homes[i]), "EVOSYN_DB": db}, "up", "--prefect-port", str(ports[2 * i]),
                   "--mlflow-port", str(ports[2 * i + 1]), "--pool", "cpu", "--timeout", "300", timeout=900)

    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(STACKS) as pool:
            outs = list(pool.map(up, range(STACKS)))
        t_up = time.monotonic() - t0
        for out, (prefect_url, mlflow_url) in zip(outs, urls):
            assert prefect_url in out and mlflow_url in out and "database     PostgreSQL" in out
            assert password not in out
        # the three Prefect servers serve one database: a work pool one of them made, all of them see
        env = _env(homes[0])
        cli(env, "deploy")
        for prefect_url, _ in urls:
            assert api(f"{prefect_url}/api/work_pools/cpu")["name"] == "cpu"
        dep = api(f"{urls[0][0]}/api/deployments/name/evosyn-run/evosyn-run")
        run = api(f"{urls[0][0]}/api/deployments/{dep['id']}/create_flow_run", {"parameters": {"cfg": RUN_CFG}})
        deadline = time.monotonic() + 300
        while (state := api(f"{urls[0][0]}/api/flow_runs/{run['id']}")["state"])["type"] not in \
                ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            assert time.monotonic() < deadline, f"flow run still {state['type']} after 300s"
            time.sleep(2)
        assert state["type"] == "COMPLETED", f"{state}; worker logs under {tmp_path}/home*/logs"
        t_run = time.monotonic() - t0 - t_up
        # one of the three workers ran it; every Prefect server and every MLflow server shows it
        for prefect_url, mlflow_url in urls:
            assert api(f"{prefect_url}/api/flow_runs/{run['id']}")["state"]["type"] == "COMPLETED"
            exp = api(f"{mlflow_url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=evosyn")["experiment"]
            found = api(f"{mlflow_url}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment_id"]]})
            names = sorted(r["info"]["run_name"] for r in found["runs"])
            assert len(names) == 2 and names[1] == f"{names[0]}/round-1", names
    finally:
        recorded = {s.pid for h in homes for s in load_state(h, lenient=True).values()}
        everything = family(recorded) | recorded
        downs = [subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "down"], cwd=REPO, env=_env(h),
                                capture_output=True, text=True, timeout=180, check=False) for h in homes]
        survivors = [p for p in everything if alive(p)]
        for pid in survivors:  # never left behind, also when the test failed above: killed, then reported
            stop_process(pid, grace=5)
    assert all(d.returncode == 0 for d in downs), [d.stderr[-1000:] for d in downs]
    assert everything and not survivors, f"processes of ours survived `evosyn down`: {survivors}"
    assert all(port_free(p) for p in ports) and not any((h / "services.json").exists() for h in homes)
    # the password reached the servers through their environment only: no log, state or artifact holds it
    leaked = [p for h in homes for p in h.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert not leaked, leaked
    assert not any((h / "mlflow.db").exists() for h in homes)  # the runs logged to PostgreSQL, not sqlite
    print(f"{STACKS} concurrent ups {t_up:.0f}s, deploy+run {t_run:.0f}s")
