"""agents/learners/serving.py with a stand-in `llamafactory-cli api` (a Python script answering /v1/models on the
port it is given): served while the block runs, stopped with its children after it, one error when it cannot start."""
from __future__ import annotations

import json
import sys
import time
import urllib.request

import pytest

from evosyn.agents.learners.serving import ServeError, serving
from evosyn.agents.servers import alive, http_ok
from evosyn.config import LlamaFactoryConfig

FAKE_CLI = """#!{python}
import http.server, json, os, subprocess, sys, time
mode = {mode!r}
if mode == "crash":
    print("CUDA error: no kernel image", flush=True)
    raise SystemExit(2)
assert sys.argv[1] == "api" and os.environ["API_MODEL_NAME"] == "checkpoint"
# a child of its own, as a real engine's workers: the stop must reach it too
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print("pids", os.getpid(), child.pid, flush=True)
if mode == "mute":
    time.sleep(300)

class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/v1/models"
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(json.dumps({{"data": [{{"id": "checkpoint"}}]}}).encode())

    def log_message(self, *args):
        pass

print("serving", flush=True)
http.server.ThreadingHTTPServer((os.environ["API_HOST"], int(os.environ["API_PORT"])), Models).serve_forever()
"""


def fake_cli(tmp_path, mode: str) -> str:
    path = tmp_path / f"llamafactory-cli-{mode}"
    path.write_text(FAKE_CLI.format(python=sys.executable, mode=mode))
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt" / "checkpoint"
    ckpt.mkdir(parents=True)
    return ckpt


def test_the_checkpoint_is_served_while_the_block_runs_and_stopped_after(tmp_path, checkpoint):
    lf = LlamaFactoryConfig(serve="llamafactory", serve_timeout_s=60)
    with serving(checkpoint, lf, cli=fake_cli(tmp_path, "ok")) as served:
        assert served.engine == "llamafactory" and served.model == "checkpoint"
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{served.base_url}/models") as r:
            assert json.loads(r.read())["data"][0]["id"] == "checkpoint"
        pids = server_pids(served.log)
        assert len(pids) == 2 and all(alive(p) for p in pids) and "serving" in served.log.read_text()
    assert not [p for p in pids if alive(p)]  # the server and its child
    assert not http_ok(f"{served.base_url}/models")
    assert (checkpoint.parent / "serve.yaml").exists()


def server_pids(log) -> set[int]:
    """The fake server's PID and its child's, as it logged them."""
    line = next(ln for ln in log.read_text().splitlines() if ln.startswith("pids "))
    return {int(p) for p in line.split()[1:]}


def test_a_server_that_exits_is_one_error_with_its_last_line(tmp_path, checkpoint):
    lf = LlamaFactoryConfig(serve="llamafactory", serve_timeout_s=60)
    with pytest.raises(ServeError, match=r"exited with 2 before it answered \(CUDA error: no kernel image\)"):
        with serving(checkpoint, lf, cli=fake_cli(tmp_path, "crash")):
            pytest.fail("served")


def test_a_server_that_never_answers_is_stopped_after_its_timeout(tmp_path, checkpoint):
    lf = LlamaFactoryConfig(serve="llamafactory", serve_timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(ServeError, match=r"did not answer within 2s \(llamafactory.serve_timeout_s\)"):
        with serving(checkpoint, lf, cli=fake_cli(tmp_path, "mute")):
            pytest.fail("served")
    assert time.monotonic() - t0 < 30
    pids = server_pids(checkpoint.parent / "serve-llamafactory.log")
    assert len(pids) == 2 and not [p for p in pids if alive(p)]
