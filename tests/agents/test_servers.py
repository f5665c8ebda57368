"""agents/servers.py, on real processes: a server's own session, its readiness, and a stop that reaches its whole tree."""
from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from evosyn.agents import servers
from evosyn.agents.servers import ServerExited, ServerNotReady, alive, family, http_ok, log_tail, wait_ready

# a server that starts a grandchild (a uvicorn worker, say) and waits
TREE = ("import subprocess, sys, time; print('up', flush=True); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)")


def wait_for(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_server_runs_in_its_own_session_with_its_output_in_the_log(tmp_path):
    log = tmp_path / "logs" / "s.log"
    log.parent.mkdir()
    log.write_text("before\n")
    proc = servers.start([sys.executable, "-c", TREE], log)
    try:
        wait_for(lambda: len(family({proc.pid})) == 2 and "up" in log.read_text())
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)
        assert log.read_text().splitlines() == ["before", "up"]  # appended
        assert log_tail(log, n=1) == "up" and log_tail(tmp_path / "missing.log") == ""
    finally:
        left = servers.stop(proc, grace=5)
    assert left == set() and proc.returncode is not None  # reaped
    assert not family({proc.pid})


def test_stop_reaches_what_the_server_left_in_its_session(tmp_path):
    # the server exits at once and leaves its child behind, reparented: only the session still names it
    code = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])"
    proc = servers.start([sys.executable, "-c", code], tmp_path / "s.log")
    proc.wait(timeout=10)
    wait_for(lambda: len(family({proc.pid})) == 1)
    orphan = next(iter(family({proc.pid})))
    assert servers.stop(proc.pid, grace=5) == set()
    assert not alive(orphan)


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"
    log = tmp_path / "s.log"
    proc = servers.start([sys.executable, "-c", code], log)
    wait_for(lambda: "up" in log.read_text())
    t0 = time.monotonic()
    assert servers.stop(proc, grace=0.5) == set()
    assert proc.returncode == -9 and time.monotonic() - t0 < 10


def test_an_exited_unreaped_child_is_not_alive():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE)  # exited, not yet waited for
    assert not alive(proc.pid) and proc.pid not in family({proc.pid})
    proc.wait(timeout=5)
    assert not alive(proc.pid) and not alive(-1)


def test_wait_ready_returns_when_ready_and_names_an_exit_or_a_timeout(tmp_path):
    sleeper = servers.start([sys.executable, "-c", "import time; time.sleep(120)"], tmp_path / "a.log")
    try:
        calls = []
        wait_ready(sleeper, lambda: calls.append(1) or len(calls) == 3, timeout=10, interval=0.01)
        assert len(calls) == 3
        with pytest.raises(ServerNotReady, match="not ready within 0.2s"):
            wait_ready(sleeper, lambda: False, timeout=0.2, interval=0.05)
        with pytest.raises(ServerNotReady):  # by PID, as `evosyn up` polls a recorded service
            wait_ready(sleeper.pid, lambda: False, timeout=0.1, interval=0.05)
    finally:
        servers.stop(sleeper, grace=5)
    failing = servers.start([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "b.log")
    with pytest.raises(ServerExited) as err:
        wait_ready(failing, lambda: False, timeout=30, interval=0.05)
    assert err.value.returncode == 3


def test_a_server_started_to_die_with_its_parent_gets_sigterm_when_the_parent_is_killed(tmp_path):
    code = ("import sys; from evosyn.agents import servers; "
            f"p = servers.start([sys.executable, '-c', 'import time; time.sleep(120)'], {str(tmp_path / 's.log')!r}, "
            "die_with_parent=True); print(p.pid, flush=True); import time; time.sleep(120)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pid = int(parent.stdout.readline())
        assert alive(pid)
    finally:
        parent.kill()
        parent.wait()
    wait_for(lambda: not alive(pid))


@pytest.fixture
def health_url():
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_http_ok_reaches_a_loopback_server_past_a_proxy(health_url, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{servers.free_port()}")  # nothing listens there
    monkeypatch.setenv("http_proxy", os.environ["HTTP_PROXY"])
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert http_ok(f"{health_url}/health")
    assert not http_ok(f"{health_url}/loading")  # 503 while a model loads
    assert not http_ok(f"http://127.0.0.1:{servers.free_port()}/health")


def test_listens_tells_our_server_from_another_on_the_port(tmp_path):
    """A port picked as free can be taken by another command's server first: readiness must see whose it is."""
    port = servers.free_port()
    serve = ("import http.server, sys; http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), "
             "http.server.SimpleHTTPRequestHandler).serve_forever()")
    theirs = servers.start([sys.executable, "-c", serve, str(port)], tmp_path / "theirs.log")
    ours = servers.start([sys.executable, "-c", "import time; time.sleep(120)"], tmp_path / "ours.log")
    try:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/"))
        assert servers.listens(theirs, port) and servers.listens(theirs.pid, port)
        assert not servers.listens(ours, port)  # the port answers, but not from our process tree
        assert not servers.listens(theirs, servers.free_port())
    finally:
        servers.stop(theirs, grace=5)
        servers.stop(ours, grace=5)
