"""Local services for `evosyn up` / `evosyn down`: Prefect server, MLflow server, process workers.

Each service is started, polled and stopped by agents/servers.py (its own session, so that stopping it
reaches every process it spawned: uvicorn children, flow-run subprocesses); the PIDs live in
``<root>/services.json``. The MLflow server serves the same
sqlite store the runs write to (``<root>/mlflow.db``, artifacts under
``<root>/mlartifacts``), so the UI shows every run, whether it was started by
`evosyn run` or by a worker.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from agents import servers
from agents.servers import (HOST, ServerExited, ServerNotReady, alive, family, http_ok, log_tail, port_free,
                            signal_all, wait_gone, wait_ready)
from storage import atomic
from storage.atomic import read_or_none
from storage.tracking import default_tracking_uri

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
def stop(service: Service, grace: float = 15.0) -> set[int]:
    """Stop a service and everything it spawned; returns the PIDs that survived (none when clean)."""
    if not family({service.pid}):
        return set()
    if service.name.startswith("worker-"):
        # a Prefect worker finishes its current poll on the first signal and exits on the second
        signal_all({service.pid}, signal.SIGINT)
        wait_gone({service.pid}, 2.0)
        if alive(service.pid):
            signal_all({service.pid}, signal.SIGINT)
    return servers.stop(service.pid, grace=grace)


# ---------------------------------------------------------------- health
def worker_registered(api_url: str, pool: str, name: str) -> bool:
    req = urllib.request.Request(f"{api_url}/work_pools/{pool}/workers/filter", data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with servers.open_url(req, timeout=2.0) as resp:
            return any(w.get("name") == name for w in json.loads(resp.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until(service: Service, check: Callable[[], bool], timeout: float) -> None:
    try:
        wait_ready(service.pid, check, timeout)
    except ServerExited:
        raise ServiceError(f"{service.name} exited during startup; log {service.log}: "
                           f"{log_tail(service.log, limit=10**6)}") from None
    except ServerNotReady:
        raise ServiceError(f"{service.name} not healthy after {timeout:.0f}s; log {service.log}: "
                           f"{log_tail(service.log, limit=10**6)}") from None


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
    log = root / "logs" / f"{name}.log"
    proc = servers.start(cmd, log, env=env, cwd=root)
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
