"""The one way the project runs a server process: started in a session of its own, polled until it is
ready, and stopped with everything it spawned.

Used by every server EvoSyn starts: the services of `evosyn up` (flows/services.py) and the temporary
Prefect server of a run (flows/prefect_api.py), a trained checkpoint's OpenAI-compatible server
(agents/learners/serving.py) and the real-model runtime (agents/llm/local_model.py). It lives in
``agents`` because that is the lowest layer with a server to run; ``flows`` imports it from here.

A server starts with ``start_new_session``, so its session id is its PID: stopping it reaches its
children (uvicorn workers, flow-run subprocesses) and anything they left in that session after their
parent exited, found with psutil (``family``).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

HOST = "127.0.0.1"
_GONE = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


class ServerExited(RuntimeError):
    """The server's process ended before it was ready; ``returncode`` when it was our child."""

    def __init__(self, returncode: int | None):
        super().__init__(f"exited with {returncode}" if returncode is not None else "exited")
        self.returncode = returncode


class ServerNotReady(TimeoutError):
    """The server was still not ready when the time allowed for its start ran out."""


# ---------------------------------------------------------------- start
def _die_with_parent() -> None:  # in the child, before exec: SIGTERM when the process that started it dies
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the caller's stop still ends it
        pass


def start(argv: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
          append: bool = True, die_with_parent: bool = False) -> subprocess.Popen:
    """Start ``argv`` in its own session, stdin closed, stdout and stderr into ``log`` (appended, or a new file).

    ``die_with_parent``: the server gets SIGTERM when the process that started it dies (Linux), for a server
    that must never outlive its caller even on a SIGKILL.
    """
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab" if append else "wb") as fh:
        return subprocess.Popen(list(argv), env=None if env is None else dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent if die_with_parent else None)


# ---------------------------------------------------------------- state
def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in _GONE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):  # ValueError: a negative pid
        return False


def _exit_code(server: subprocess.Popen | int) -> tuple[bool, int | None]:
    """(whether it has ended, its exit code when it was our child)."""
    if isinstance(server, subprocess.Popen):
        code = server.poll()
        return code is not None, code
    return not alive(server), None


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)  # psutil has no session id; Linux answers for any process
    except OSError:
        return None


def family(pids: set[int]) -> set[int]:
    """Live processes that descend from ``pids`` or share their session: everything those servers started."""
    parent, session = {}, {}
    for proc in psutil.process_iter(["ppid", "status"]):
        if proc.info["status"] not in _GONE and proc.info["ppid"] is not None:
            parent[proc.pid], session[proc.pid] = proc.info["ppid"], _session(proc.pid)
    out = {p for p in parent if p in pids or session[p] in pids}
    grew = True
    while grew:
        new = {p for p, pp in parent.items() if pp in out and p not in out}
        out |= new
        grew = bool(new)
    return out


def log_tail(path: Path | str, n: int = 5, limit: int = 800) -> str:
    """The last ``n`` non-blank lines of a log, joined on one line (at most ``limit`` characters)."""
    try:
        lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[-limit:]


# ---------------------------------------------------------------- health
# a server of ours on the loopback is never reached through a proxy (HTTP_PROXY set and NO_PROXY without
# 127.0.0.1 would send the request elsewhere); any other host goes the way the environment says
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def open_url(request: urllib.request.Request | str, timeout: float):
    """``urlopen`` for the project's own servers: loopback directly, other hosts as the environment says."""
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    # another host: an opener built now, so it reads the proxy settings the environment has now
    opener = _DIRECT if (urllib.parse.urlsplit(url).hostname or "") in _LOOPBACK else urllib.request.build_opener()
    return opener.open(request, timeout=timeout)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Whether GET ``url`` answers 2xx."""
    try:
        with open_url(url, timeout) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError):
        return False


def listens(server: subprocess.Popen | int, port: int) -> bool:
    """Whether ``server`` (or a process it started) is the one listening on ``port``.

    A port picked by ``free_port`` is free only when picked: another command may start its own server on it
    before ours binds, and then a health check on the port is answered by theirs. Readiness asks both.
    """
    pid = server.pid if isinstance(server, subprocess.Popen) else server
    for member in family({pid}):
        try:
            conns = psutil.Process(member).net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
            return True
    return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS's pick)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def wait_ready(server: subprocess.Popen | int, ready: Callable[[], bool], timeout: float,
               interval: float = 0.5) -> None:
    """Poll ``ready()`` until it is true; ``ServerExited`` when the process ends first, ``ServerNotReady``
    after ``timeout`` seconds. ``server``: our child (its exit code is reported) or a PID."""
    deadline = time.monotonic() + timeout
    while True:
        ended, code = _exit_code(server)
        if ended:
            raise ServerExited(code)
        if ready():
            return
        if time.monotonic() >= deadline:
            raise ServerNotReady(f"not ready within {timeout:g}s")
        time.sleep(interval)


# ---------------------------------------------------------------- stop
def signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    """The PIDs still alive after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def stop(server: subprocess.Popen | int, grace: float = 15.0, kill_wait: float = 5.0) -> set[int]:
    """SIGTERM to the server and everything it started (``family``), SIGKILL to what is left after ``grace``
    seconds; returns the PIDs that survived (none when clean). A child of ours is reaped."""
    pid = server.pid if isinstance(server, subprocess.Popen) else server
    procs = family({pid})
    if procs:
        signal_all(procs, signal.SIGTERM)
        left = wait_gone(procs | family({pid}), grace)
        if left:
            signal_all(left, signal.SIGKILL)
            left = wait_gone(left, kill_wait)
    else:
        left = set()
    if isinstance(server, subprocess.Popen):
        try:
            server.wait(timeout=kill_wait)
        except subprocess.TimeoutExpired:
            left.add(pid)
    return left
