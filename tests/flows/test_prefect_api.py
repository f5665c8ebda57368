"""Which Prefect API a run uses (flows/prefect_api.py), and a temporary server start that is robust.

Selection: PREFECT_API_URL when set (it must answer), else the server `evosyn up` recorded in
<root>/services.json, else Prefect's temporary server, started with a timeout and one retry; a final
failure is one line. The selection tests use a tiny HTTP server answering /health (enough to choose,
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

from flows.prefect_api import PrefectApiError, ensure_prefect_api, start_ephemeral
from flows.services import Service, save_state
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
        from flows.prefect_api import recorded_api

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


def test_the_servers_environment_adds_only_what_the_user_left_unset(monkeypatch):
    from flows.prefect_api import _server_env

    monkeypatch.setenv("EVOSYN_TEST_SET_BY_USER", "mine")
    monkeypatch.delenv("EVOSYN_TEST_UNSET", raising=False)
    with _server_env({"EVOSYN_TEST_SET_BY_USER": "ours", "EVOSYN_TEST_UNSET": "ours"}):
        assert (os.environ["EVOSYN_TEST_SET_BY_USER"], os.environ["EVOSYN_TEST_UNSET"]) == ("mine", "ours")
    assert os.environ["EVOSYN_TEST_SET_BY_USER"] == "mine" and "EVOSYN_TEST_UNSET" not in os.environ


def test_the_callers_own_failure_beside_the_start_is_its_own_error(monkeypatch):
    from prefect.server.api.server import SubprocessASGIServer

    def broken_imports():
        raise ImportError("no module named evosyn_test_missing")

    with pytest.raises(ImportError, match="evosyn_test_missing"):
        start_ephemeral(timeouts=(0.01, 0.01), meanwhile=broken_imports)
    assert None not in SubprocessASGIServer._instances  # its server was stopped, not retried


def test_a_start_that_times_out_is_retried_once_then_one_line(monkeypatch):
    from prefect.server.api.server import SubprocessASGIServer

    launched: list[subprocess.Popen] = []
    real_launch = SubprocessASGIServer._run_uvicorn_command

    def counting_launch(self):  # the real launch, counted
        proc = real_launch(self)
        launched.append(proc)
        return proc

    monkeypatch.setattr(SubprocessASGIServer, "_run_uvicorn_command", counting_launch)
    t0 = time.monotonic()
    with pytest.raises(PrefectApiError) as err:
        start_ephemeral(timeouts=(0.01, 0.01))  # no server answers within 10 ms
    msg = str(err.value)
    assert len(launched) == 2, "one attempt and exactly one retry"
    assert "2 attempts" in msg and "Timed out" in msg and "evosyn up" in msg and "\n" not in msg
    for proc in launched:  # each slow server process was stopped, none is left behind
        assert proc.poll() is not None
    assert None not in SubprocessASGIServer._instances  # the next call starts afresh
    assert time.monotonic() - t0 < 60


CFG = "domain: airline\nrounds: 1\nbudget: 4\ntest_size: 4\n"


def _cli(tmp_path, env_extra, *args):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(CFG)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"EVOSYN_HOME": str(tmp_path / "home"), "PREFECT_HOME": PREFECT_HOME,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), **env_extra})
    return subprocess.run([sys.executable, "-m", "flows.cli", "run", "--config", str(cfg), *args], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)


def test_run_with_an_unreachable_prefect_api_url_is_one_line_and_writes_nothing(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/api"
    done = _cli(tmp_path, {"PREFECT_API_URL": dead})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("error: PREFECT_API_URL=") and dead in done.stderr
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "home").exists()


def test_run_whose_temporary_server_never_starts_is_one_line_and_writes_nothing(tmp_path):
    # a 0 s start-up budget: both attempts time out at once, deterministically
    done = _cli(tmp_path, {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "0"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("error: the temporary Prefect API server did not start (2 attempts")
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "home").exists()


PROBE = """
import json, sys
from flows.prefect_api import ensure_prefect_api
api = ensure_prefect_api(sys.argv[1])
from prefect import flow
from prefect.server.api.server import SubprocessASGIServer

@flow(name=sys.argv[2])
def probe(x: int) -> int:
    return x + 1

print(json.dumps({"api": api, "result": probe(41), "own_server": None in SubprocessASGIServer._instances}))
"""


def test_retry_starts_a_real_server_and_a_run_uses_the_recorded_one(tmp_path, monkeypatch):
    """A first attempt that fails, a retry that starts Prefect's real temporary server (the one the flow
    engine reuses), then a second process whose store root records that server runs a real flow on it."""
    from prefect.server.api.server import SubprocessASGIServer

    monkeypatch.setenv("PREFECT_HOME", PREFECT_HOME)  # the migrated database the slow flow tests share
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    ran = []
    api = start_ephemeral(timeouts=(0.01, 300.0), meanwhile=lambda: ran.append(1))
    assert ran == [1]  # the caller's imports ran beside the first attempt, and only then
    server = SubprocessASGIServer()  # what Prefect's own client calls: the same, running instance
    try:
        assert server.running and server.api_url == api
        with urllib.request.urlopen(f"{api}/health", timeout=10) as resp:
            assert resp.status == 200
        import psutil

        # the temporary server runs without the automation services; this process's environment is untouched
        assert psutil.Process(server.server_process.pid).environ()["PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED"] == \
            "false"
        assert "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED" not in os.environ
        root = tmp_path / "root"
        root.mkdir()
        save_state(root, {"prefect": Service("prefect", server.server_process.pid, server.address, "p.log")})
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        name = f"evosyn-api-probe-{uuid.uuid4().hex[:8]}"
        done = subprocess.run([sys.executable, "-c", PROBE, str(root), name], env=env, capture_output=True,
                              text=True, timeout=300, cwd=tmp_path, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out == {"api": api, "result": 42, "own_server": False}
        req = urllib.request.Request(f"{api}/flow_runs/filter", method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"flows": {"name": {"any_": [name]}}}).encode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            runs = json.loads(resp.read())
        assert [r["state_type"] for r in runs] == ["COMPLETED"]  # the run is in the recorded server
    finally:
        server.stop()
