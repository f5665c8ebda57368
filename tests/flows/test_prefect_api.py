"""Which Prefect API a run uses (flows/prefect_api.py), and a temporary server start that is robust.

Selection: PREFECT_API_URL when set (it must answer), else the server `evosyn up` recorded in
<root>/services.json, else a temporary `prefect server start`, started with a timeout and one retry; a
final failure is one line. The selection tests use a tiny HTTP server answering /health (enough to choose,
not to run a flow); one test starts a real temporary server through the retry path and runs a real
flow against it as the recorded server of a store root.
"""
from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from evosyn.agents.servers import alive
from evosyn.flows.prefect_api import PrefectApiError, ensure_prefect_api, start_temporary
from evosyn.flows.services import Service, save_state
from tests.prefect_home import PREFECT_HOME

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def health_server():
    """An HTTP server on 127.0.0.1 answering 200 to GET <anything>/health: a Prefect API as far as choosing goes."""
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code = 200 if self.path.rstrip("/").endswith("/health") else 404
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b"true")

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _sleeper(*argv: str):
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *argv])


@pytest.fixture
def prefect_pid():
    """A live process whose command line names prefect, as the server `evosyn up` records does."""
    p = _sleeper("prefect", "server", "start")
    yield p.pid
    p.kill()
    p.wait()


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    yield monkeypatch
    os.environ.pop("PREFECT_API_URL", None)  # ensure_prefect_api may have set it, and refreshed the settings
    if "prefect.context" in sys.modules:
        import prefect.context

        prefect.context.refresh_global_settings_context()


def test_a_set_prefect_api_url_is_used_when_it_answers(tmp_path, clean_env, health_server):
    clean_env.setenv("PREFECT_API_URL", f"{health_server}/api/")
    assert ensure_prefect_api(tmp_path / "root") == f"{health_server}/api"


def test_a_set_prefect_api_url_that_does_not_answer_is_one_line(tmp_path, clean_env):
    dead = f"http://127.0.0.1:{free_port()}/api"
    clean_env.setenv("PREFECT_API_URL", dead)
    with pytest.raises(PrefectApiError) as err:
        ensure_prefect_api(tmp_path / "root")
    assert dead in str(err.value) and "\n" not in str(err.value) and "evosyn up" in str(err.value)


def test_the_server_evosyn_up_recorded_is_preferred(tmp_path, clean_env, health_server, prefect_pid):
    root = tmp_path / "root"
    root.mkdir()
    # a live pid (this process) and a URL that answers /api/health, as `evosyn up` records them
    save_state(root, {"prefect": Service("prefect", prefect_pid, health_server, str(root / "logs/prefect.log"))})
    assert ensure_prefect_api(root) == f"{health_server}/api"
    assert os.environ["PREFECT_API_URL"] == f"{health_server}/api"  # what the flow (and any child) then uses


def test_a_recorded_pid_now_held_by_another_program_is_ignored(tmp_path, clean_env, health_server):
    root = tmp_path / "root"
    root.mkdir()
    other = _sleeper("not-the-server")  # after a reboot, the recorded PID may belong to anything
    try:
        save_state(root, {"prefect": Service("prefect", other.pid, health_server, str(root / "logs/prefect.log"))})
        from evosyn.flows.prefect_api import recorded_api

        assert recorded_api(root) is None
    finally:
        other.kill()
        other.wait()


def test_a_recorded_server_that_does_not_answer_is_one_line(tmp_path, clean_env, prefect_pid):
    root = tmp_path / "root"
    root.mkdir()
    url = f"http://127.0.0.1:{free_port()}"
    save_state(root, {"prefect": Service("prefect", prefect_pid, url, str(root / "logs/prefect.log"))})
    with pytest.raises(PrefectApiError) as err:
        ensure_prefect_api(root)
    msg = str(err.value)
    assert url in msg and "prefect.log" in msg and "evosyn down" in msg and "\n" not in msg
    assert "PREFECT_API_URL" not in os.environ


def test_a_dead_recorded_server_is_ignored(tmp_path, clean_env):
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_ENABLED, temporary_settings

    root = tmp_path / "root"
    root.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    save_state(root, {"prefect": Service("prefect", dead.pid, "http://127.0.0.1:9", "x.log")})
    # with temporary servers off, falling through the stale record ends in the "no Prefect API" line
    with temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_ENABLED: False}), \
            pytest.raises(PrefectApiError, match="no Prefect API.*PREFECT_SERVER_EPHEMERAL_ENABLED"):
        ensure_prefect_api(root)


@pytest.fixture
def counted_starts(monkeypatch):
    """Every server process ``start_temporary`` launches (the real launch, recorded)."""
    from evosyn.agents import servers

    launched: list[subprocess.Popen] = []
    real_start = servers.start

    def counting_start(*args, **kwargs):
        proc = real_start(*args, **kwargs)
        launched.append(proc)
        return proc

    monkeypatch.setattr(servers, "start", counting_start)
    return launched


def test_the_callers_own_failure_beside_the_start_is_its_own_error(clean_env, counted_starts):
    def broken_imports():
        raise ImportError("no module named evosyn_test_missing")

    with pytest.raises(ImportError, match="evosyn_test_missing"):
        start_temporary(timeouts=(60.0, 60.0), meanwhile=broken_imports)
    assert len(counted_starts) == 1, "not retried"
    assert counted_starts[0].poll() is not None  # its server was stopped
    assert "PREFECT_API_URL" not in os.environ


def test_a_start_that_times_out_is_retried_once_then_one_line(clean_env, counted_starts):
    t0 = time.monotonic()
    with pytest.raises(PrefectApiError) as err:
        start_temporary(timeouts=(0.01, 0.01))  # no server answers within 10 ms
    msg = str(err.value)
    assert len(counted_starts) == 2, "one attempt and exactly one retry"
    assert "2 attempts" in msg and "not ready within 0.01s" in msg and "evosyn up" in msg and "\n" not in msg
    for proc in counted_starts:  # each slow server process was stopped and reaped, none is left behind
        assert proc.poll() is not None and not alive(proc.pid)
    assert "PREFECT_API_URL" not in os.environ
    assert time.monotonic() - t0 < 60


CFG = "domain: airline\nrounds: 1\nbudget: 4\ntest_size: 4\n"


def _cli(tmp_path, env_extra, *args):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(CFG)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"EVOSYN_HOME": str(tmp_path / "home"), "PREFECT_HOME": PREFECT_HOME,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), **env_extra})
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg), *args], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)


def test_run_with_an_unreachable_prefect_api_url_is_one_line_and_writes_nothing(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/api"
    done = _cli(tmp_path, {"PREFECT_API_URL": dead})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("error: PREFECT_API_URL=") and dead in done.stderr
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "home").exists()


def test_run_whose_temporary_server_never_starts_is_one_line_and_writes_nothing(tmp_path):
    # a 0 s start-up budget, and a database no server can open: on a loaded machine the run's own imports (done
    # while the first attempt boots) can outlast a server's start, which a 0 s budget alone then still accepts
    dead_db = f"postgresql+asyncpg://evosyn:none@127.0.0.1:{free_port()}/none"
    done = _cli(tmp_path, {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "0",
                           "PREFECT_API_DATABASE_CONNECTION_URL": dead_db})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("error: the temporary Prefect API server did not start (2 attempts")
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "home").exists()


PROBE = """
import json, os, sys
from evosyn.flows.prefect_api import ensure_prefect_api
api = ensure_prefect_api(sys.argv[1])
from prefect import flow

@flow(name=sys.argv[2])
def probe(x: int) -> int:
    return x + 1

print(json.dumps({"api": api, "result": probe(41), "env": os.environ["PREFECT_API_URL"]}))
"""


def test_retry_starts_a_real_server_and_a_run_uses_the_recorded_one(tmp_path, clean_env):
    """A first attempt that fails, a retry that starts a real `prefect server start` (this process's flows then
    use it), then a second process whose store root records that server runs a real flow on it."""
    import psutil

    clean_env.setenv("PREFECT_HOME", PREFECT_HOME)  # the migrated database the slow flow tests share
    ran = []
    server = start_temporary(timeouts=(0.01, 300.0), meanwhile=lambda: ran.append(1))
    try:
        api = server.api
        assert ran == [1]  # the caller's imports ran beside the first attempt, and only then
        assert os.environ["PREFECT_API_URL"] == api  # what this process's flows (and any child) use
        with urllib.request.urlopen(f"{api}/health", timeout=10) as resp:
            assert resp.status == 200
        # the temporary server runs without the automation services and the UI; the user's settings win
        env = psutil.Process(server.proc.pid).environ()
        assert env["PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED"] == "false" and env["PREFECT_SERVER_UI_ENABLED"] == "false"
        assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"]
        assert "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED" not in os.environ
        root = tmp_path / "root"
        root.mkdir()
        save_state(root, {"prefect": Service("prefect", server.proc.pid, api.removesuffix("/api"), str(server.log))})
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        name = f"evosyn-api-probe-{uuid.uuid4().hex[:8]}"
        done = subprocess.run([sys.executable, "-c", PROBE, str(root), name], env=env, capture_output=True,
                              text=True, timeout=300, cwd=tmp_path, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out == {"api": api, "result": 42, "env": api}
        req = urllib.request.Request(f"{api}/flow_runs/filter", method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"flows": {"name": {"any_": [name]}}}).encode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            runs = json.loads(resp.read())
        assert [r["state_type"] for r in runs] == ["COMPLETED"]  # the run is in the recorded server
    finally:
        server.stop()
    assert not alive(server.proc.pid) and not server.log.parent.exists()


def test_a_temporary_server_dies_with_the_process_that_started_it(tmp_path):
    """SIGKILLed, a command cannot stop its server: the server is told by the kernel (its own session would
    otherwise keep it running)."""
    import psutil

    code = ("import sys; from evosyn.flows.prefect_api import start_temporary; s = start_temporary(); "
            "print(s.proc.pid, flush=True); import time; time.sleep(600)")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"PREFECT_HOME": PREFECT_HOME,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    cmd = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        pid = int(cmd.stdout.readline())
        assert alive(pid) and "prefect" in " ".join(psutil.Process(pid).cmdline())
    finally:
        cmd.kill()
        cmd.wait()
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:  # SIGTERM, then uvicorn's shutdown
        time.sleep(0.1)
    assert not alive(pid)
