"""Local services for `evosyn up` / `evosyn down`: Prefect server, MLflow server, process workers.

Each service runs in its own session (``start_new_session``) so that stopping it
reaches every process it spawned (uvicorn children, flow-run subprocesses);
the PIDs live in ``<root>/services.json``. The MLflow server serves the same
sqlite store the runs write to (``<root>/mlflow.db``, artifacts under
``<root>/mlartifacts``), so the UI shows every run, whether it was started by
`evosyn run` or by a worker.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from storage.tracking import default_tracking_uri
from storage import atomic
from storage.atomic import read_or_none

HOST = "127.0.0.1"
STATE_FILE = "services.json"


class ServiceError(RuntimeError):
    """A one-line, user-facing failure to start, reach or stop a service."""


@dataclass
class Service:
    name: str
    pid: int
    url: str
    log: str


# ---------------------------------------------------------------- state
def state_path(root: Path) -> Path:
    return Path(root) / STATE_FILE


def _parse_state(path: Path) -> dict[str, Service]:
    return {k: Service(**v) for k, v in json.loads(path.read_text()).items()}


def load_state(root: Path, *, lenient: bool = False) -> dict[str, Service]:
    """The recorded services. An unreadable file raises (OSError / ValueError / TypeError): the PIDs it held
    cannot be rebuilt, and reading it as "nothing running" would let `up` start a second stack beside
    the first, or `down` leave it running. ``lenient`` reads it as nothing recorded, with one log line
    (for callers that only look for a server to reuse)."""
    path = state_path(root)
    if lenient:
        return read_or_none(path, _parse_state, "services state") or {}
    return _parse_state(path) if path.is_file() else {}


def save_state(root: Path, services: dict[str, Service]) -> None:
    atomic.write_json(state_path(root), {k: asdict(v) for k, v in services.items()}, indent=2)


# ---------------------------------------------------------------- processes
_GONE = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in _GONE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):  # ValueError: a negative pid
        return False


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)  # psutil has no session id; Linux answers for any process
    except OSError:
        return None


def family(pids: set[int]) -> set[int]:
    """Live processes that descend from ``pids`` or share their session: everything a service started."""
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


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def stop(service: Service, grace: float = 15.0) -> set[int]:
    """Stop a service and everything it spawned; returns the PIDs that survived (none when clean)."""
    procs = family({service.pid})
    if not procs:
        return set()
    if service.name.startswith("worker-"):
        # a Prefect worker finishes its current poll on the first signal and exits on the second
        _signal({service.pid}, signal.SIGINT)
        _wait_gone({service.pid}, 2.0)
        _signal({service.pid} & {p for p in procs if alive(p)}, signal.SIGINT)
    _signal(procs, signal.SIGTERM)
    left = _wait_gone(procs | family({service.pid}), grace)
    if left:
        _signal(left, signal.SIGKILL)
        left = _wait_gone(left, 5.0)
    return left


# ---------------------------------------------------------------- health
def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError):
        return False


def worker_registered(api_url: str, pool: str, name: str) -> bool:
    req = urllib.request.Request(f"{api_url}/work_pools/{pool}/workers/filter", data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2.0) as resp:
            return any(w.get("name") == name for w in json.loads(resp.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _log_tail(path: str, n: int = 5) -> str:
    try:
        lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def wait_until(service: Service, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if not alive(service.pid):
            raise ServiceError(f"{service.name} exited during startup; log {service.log}: {_log_tail(service.log)}")
        time.sleep(0.5)
    raise ServiceError(f"{service.name} not healthy after {timeout:.0f}s; log {service.log}: "
                       f"{_log_tail(service.log)}")


# ---------------------------------------------------------------- start
def service_env(root: Path, prefect_api: str, project_dir: Path) -> dict[str, str]:
    from storage import offline

    root = Path(root).resolve()
    return {**offline.OFFLINE_DEFAULTS, **os.environ,
            "EVOSYN_HOME": str(root), "PREFECT_HOME": str(root / "prefect"), "PREFECT_API_URL": prefect_api,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "PREFECT_LOGGING_LEVEL": "INFO",
            "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "INFO",  # the logs/ files keep INFO (the CLI's console: WARNING)
            # where the deployments' pull step finds the flow code (see deployments/prefect.yaml)
            "EVOSYN_PROJECT_DIR": str(project_dir)}


def _spawn(name: str, cmd: list[str], env: dict[str, str], root: Path, url: str) -> Service:
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return Service(name, proc.pid, url, str(log))


def commands(root: Path, prefect_port: int, mlflow_port: int) -> dict[str, list[str]]:
    art = str((root / "mlartifacts").resolve())
    return {
        "prefect": [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(prefect_port)],
        "mlflow": [sys.executable, "-m", "mlflow", "server", "--host", HOST, "--port", str(mlflow_port),
                   "--workers", "1", "--backend-store-uri", default_tracking_uri(root),
                   "--default-artifact-root", art, "--artifacts-destination", art],
    }


def worker_command(pool: str, name: str) -> list[str]:
    return [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process",
            "--name", name, "--install-policy", "never"]


def up(root: Path, project_dir: Path, prefect_port: int = 4200, mlflow_port: int = 5000,
       pools: tuple[str, ...] = ("cpu",), timeout: float = 180.0,
       say: Callable[[str], None] = print) -> dict[str, Service]:
    """Start what is not running yet (idempotent) and wait until every service is healthy."""
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    state = {k: s for k, s in load_state(root).items() if alive(s.pid)}
    if "prefect" in state:  # the running server decides the API the workers use
        prefect_port = int(state["prefect"].url.rsplit(":", 1)[1])
    api = f"http://{HOST}:{prefect_port}/api"
    env = service_env(root, api, project_dir)
    want = {"prefect": f"http://{HOST}:{prefect_port}", "mlflow": f"http://{HOST}:{mlflow_port}"}
    started: list[str] = []
    for name, cmd in commands(root, prefect_port, mlflow_port).items():
        if name in state:
            say(f"{name}: already running (pid {state[name].pid}) at {state[name].url}")
            continue
        port = int(want[name].rsplit(":", 1)[1])
        if not port_free(port):
            raise ServiceError(f"{name}: port {port} on {HOST} is in use by another process "
                               f"(stop it, or pick another port with --{name}-port)")
        state[name] = _spawn(name, cmd, env, root, want[name])
        started.append(name)
        save_state(root, state)
    checks = {"prefect": lambda: http_ok(f"{state['prefect'].url}/api/health"),
              "mlflow": lambda: http_ok(f"{state['mlflow'].url}/health")}
    wait_until(state["prefect"], checks["prefect"], timeout)
    for pool in pools:
        name = f"worker-{pool}"
        if name in state:
            say(f"{name}: already running (pid {state[name].pid})")
            continue
        wname = f"evosyn-{pool}-{os.getpid()}"
        state[name] = _spawn(name, worker_command(pool, wname), env, root, wname)
        started.append(name)
        save_state(root, state)
    wait_until(state["mlflow"], checks["mlflow"], timeout)
    for pool in pools:
        svc = state[f"worker-{pool}"]
        wait_until(svc, lambda pool=pool, svc=svc: worker_registered(api, pool, svc.url), timeout)
    for name in started:
        say(f"{name}: started (pid {state[name].pid})" + (f" at {state[name].url}" if "://" in state[name].url else ""))
    save_state(root, state)
    return state


def down(root: Path, say: Callable[[str], None] = print) -> list[int]:
    """Stop every recorded service (workers first); returns the PIDs still alive afterwards (none when clean)."""
    root = Path(root).resolve()
    state = load_state(root)
    order = sorted(state, key=lambda n: (not n.startswith("worker-"), n == "prefect"))
    survivors: set[int] = set()
    for name in order:
        svc = state[name]
        if not alive(svc.pid) and not family({svc.pid}):
            say(f"{name}: not running")
            continue
        left = stop(svc)
        survivors |= left
        say(f"{name}: stopped (pid {svc.pid})" if not left else f"{name}: still running: {sorted(left)}")
    survivors |= family({s.pid for s in state.values()})
    if not survivors and state_path(root).exists():
        state_path(root).unlink()
    return sorted(survivors)
