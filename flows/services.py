"""Local services for `evosyn up` / `evosyn down`: Prefect server, MLflow server, process workers.

Each service is started, polled and stopped by agents/servers.py (its own session, so that stopping it
reaches every process it spawned: uvicorn children, flow-run subprocesses); the PIDs live in
``<root>/services.json``. The MLflow server serves the same
sqlite store the runs write to (``<root>/mlflow.db``, artifacts under
``<root>/mlartifacts``), so the UI shows every run, whether it was started by
`evosyn run` or by a worker.

With ``db`` (`evosyn up --db`) both servers keep their tables in PostgreSQL instead (storage/postgres.py:
Prefect in the named database, MLflow in ``<name>_mlflow``), a server of the user's or one this root manages
(``--db local``: flows/local_postgres.py, recorded as the service ``postgres`` and stopped last). The URL
reaches each server through its environment, never its command line (which `ps` shows), and every message
and record shows it masked. The workers then log to MLflow through the MLflow server. Starts against one
database from several roots or machines take turns on PostgreSQL advisory locks while the schemas are built.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from evosyn.agents import servers
from evosyn.agents.servers import (HOST, ServerExited, ServerNotReady, alive, family, http_ok, log_tail, port_free,
                            signal_all, wait_gone, wait_ready)
from evosyn.storage import atomic, postgres
from evosyn.storage.atomic import read_or_none
from evosyn.storage.tracking import default_tracking_uri

STATE_FILE = "services.json"
LOCAL_DB = "local"  # `--db local`: a PostgreSQL server of this store root
PREFECT_SCHEMA_LOCK = "evosyn-prefect-schema"  # Prefect migrates its database when its server starts
STOP_ORDER = ("worker-", "mlflow", "prefect", "postgres")  # clients before the servers they use


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
    if service.name == "postgres":
        from evosyn.flows import local_postgres

        return local_postgres.stop(service.pid, grace=grace * 2)
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
    from evosyn.storage import offline

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


def commands(root: Path, prefect_port: int, mlflow_port: int, db: str | None = None) -> dict[str, list[str]]:
    """The servers' command lines; with a PostgreSQL ``db`` its URL goes in their environment (server_env)."""
    art = str((root / "mlartifacts").resolve())
    store = [] if db else ["--backend-store-uri", default_tracking_uri(root)]
    return {
        "prefect": [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(prefect_port)],
        "mlflow": [sys.executable, "-m", "mlflow", "server", "--host", HOST, "--port", str(mlflow_port),
                   "--workers", "1", *store, "--default-artifact-root", art, "--artifacts-destination", art],
    }


def server_env(name: str, env: dict[str, str], db: str | None) -> dict[str, str]:
    """A server's environment: with a PostgreSQL ``db``, where it keeps its tables."""
    if not db:
        return env
    if name == "prefect":
        return {**env, "PREFECT_SERVER_DATABASE_CONNECTION_URL": postgres.prefect_url(db)}
    return {**env, "MLFLOW_BACKEND_STORE_URI": postgres.mlflow_url(db)}


def database(root: Path, db: str | None, state: dict[str, Service], timeout: float,
             say: Callable[[str], None]) -> str | None:
    """The PostgreSQL URL the servers use (None: sqlite files in the store root), with both databases made and
    MLflow's schema built; ``local`` starts this root's own server unless it runs (recorded in ``state``)."""
    from evosyn.flows import local_postgres
    from evosyn.storage.mlflow_db import ensure_tracking_db

    if db is None and ("postgres" in state or local_postgres.made(root)):
        db = LOCAL_DB  # a later `up` of a root whose tables live in its own cluster: never sqlite beside them
    if db is None:
        return None
    if db == LOCAL_DB:
        if "postgres" in state:
            url = local_postgres.url(root, int(state["postgres"].url.rsplit(":", 1)[1].split("/")[0]))
            say(f"postgres: already running (pid {state['postgres'].pid}) at {postgres.masked(url)}")
        else:
            log = root / "logs" / "postgres.log"
            try:
                pid, port = local_postgres.start(root, log, timeout)
            except local_postgres.LocalPostgresError as exc:
                raise ServiceError(str(exc)) from None
            url = local_postgres.url(root, port)
            state["postgres"] = Service("postgres", pid, postgres.masked(url), str(log))
            save_state(root, state)
            say(f"postgres: started (pid {pid}) at {postgres.masked(url)}")
    else:
        url = db
    try:
        postgres.ensure_database(postgres.check(url))
        ensure_tracking_db(postgres.mlflow_url(url))  # created and built once, under an advisory lock
    except postgres.PostgresError as exc:
        raise ServiceError(f"database: {exc}") from None
    return url


def worker_command(pool: str, name: str) -> list[str]:
    return [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process",
            "--name", name, "--install-policy", "never"]


def up(root: Path, project_dir: Path, prefect_port: int = 4200, mlflow_port: int = 5000,
       pools: tuple[str, ...] = ("cpu",), timeout: float = 180.0,
       say: Callable[[str], None] = print, db: str | None = None) -> dict[str, Service]:
    """Start what is not running yet (idempotent) and wait until every service is healthy.

    ``db``: None (sqlite files in the store root), ``"local"`` (a PostgreSQL server of this root) or a
    ``postgresql://`` URL."""
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    state = {k: s for k, s in load_state(root).items() if alive(s.pid)}
    if "prefect" in state:  # the running server decides the API the workers use
        prefect_port = int(state["prefect"].url.rsplit(":", 1)[1])
    api = f"http://{HOST}:{prefect_port}/api"
    env = service_env(root, api, project_dir)
    want = {"prefect": f"http://{HOST}:{prefect_port}", "mlflow": f"http://{HOST}:{mlflow_port}"}
    for name in ("prefect", "mlflow"):
        port = int(want[name].rsplit(":", 1)[1])
        if name not in state and not port_free(port):
            raise ServiceError(f"{name}: port {port} on {HOST} is in use by another process "
                               f"(stop it, or pick another port with --{name}-port)")
    db = database(root, db, state, timeout, say)
    if db:  # the flows log to MLflow through its server: the database's password stays out of their env
        env["MLFLOW_TRACKING_URI"] = state["mlflow"].url if "mlflow" in state else want["mlflow"]
    started: list[str] = []
    checks = {"prefect": lambda: http_ok(f"{state['prefect'].url}/api/health"),
              "mlflow": lambda: http_ok(f"{state['mlflow'].url}/health")}
    # a fresh Prefect database is migrated by the first server that starts on it: one at a time
    turn = postgres.advisory_lock(db, PREFECT_SCHEMA_LOCK, timeout * 3) if db and "prefect" not in state \
        else contextlib.nullcontext()
    try:
        with turn:
            for name, cmd in commands(root, prefect_port, mlflow_port, db).items():
                if name in state:
                    say(f"{name}: already running (pid {state[name].pid}) at {state[name].url}")
                    continue
                state[name] = _spawn(name, cmd, server_env(name, env, db), root, want[name])
                started.append(name)
                save_state(root, state)
            wait_until(state["prefect"], checks["prefect"], timeout)
    except postgres.PostgresError as exc:
        raise ServiceError(f"database: {exc}") from None
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
    order = sorted(state, key=lambda n: next((i for i, p in enumerate(STOP_ORDER) if n.startswith(p)), 1))
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
