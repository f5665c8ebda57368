"""Which Prefect API the flows of a command talk to, settled once before the first flow starts.

In order of preference:

1. ``PREFECT_API_URL`` (environment or active Prefect profile): it must answer ``/health``.
2. The Prefect server `evosyn up` recorded for this store root (``<root>/services.json``), when its
   process is alive and it answers: every run then shows in that server's UI, and no run pays for a
   server start of its own.
3. A temporary server for this command alone: `prefect server start` on a free port of 127.0.0.1, run
   by agents/servers.py (its own session; SIGTERM when this process dies, also on a SIGKILL) and stopped
   when the command exits; ``PREFECT_API_URL`` then names it for the flows and any child process. It
   is started with a timeout per attempt (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``, the
   setting Prefect's own temporary server uses) and one retry after the slow process is stopped, so a
   start that times out on a loaded machine is retried once and a final failure is one line, not a
   traceback from inside the first flow call. Starts sharing one ``PREFECT_HOME`` database take turns
   (a file lock), so concurrent first runs do not migrate the same sqlite file at once.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evosyn.agents import servers
from evosyn.agents.servers import HOST, ServerExited, ServerNotReady, alive, free_port, http_ok, log_tail, wait_ready
from evosyn.flows.services import load_state
from evosyn.storage.outages import RETRY_ENV, retry_s

STARTUP_TIMEOUT_VAR = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
# The temporary server serves this command's flows alone: no UI, and only the services that record what its
# runs send (the task-run recorder, the event persister), as in Prefect's own temporary server. Its
# automations (triggers and actions evaluate every event a run sends; measured with cProfile, about a third
# of the server's CPU while a run lasts), schedules, late-run and cancellation sweeps, work-pool foreman and
# the rest serve deployments and workers, which a temporary server has none of. A value the user set wins.
TEMPORARY_SERVER_ENV = {
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    **{f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in (
        "TRIGGERS", "SCHEDULER", "LATE_RUNS", "CANCELLATION_CLEANUP", "CLEANUP_RECONCILER", "FOREMAN",
        "PAUSE_EXPIRATIONS", "REPOSSESSOR")},
}
FIX = ("start one server for all runs with `evosyn up` (runs under that store root then use it), or point "
       f"PREFECT_API_URL at a running server, or raise {STARTUP_TIMEOUT_VAR}")


class PrefectApiError(RuntimeError):
    """No Prefect API to run flows against: one line naming what was tried and the fix."""


def recorded_api(root: Path) -> str | None:
    """The API URL of the live Prefect server `evosyn up` recorded under ``root``, if any."""
    state = load_state(Path(root), lenient=True)  # an unreadable services.json records nothing usable
    svc = state.get("prefect")
    if svc is None or not alive(svc.pid) or not _runs_prefect(svc.pid):
        return None  # gone, or its PID now belongs to another program (a reboot): nothing recorded is running
    api = f"{svc.url.rstrip('/')}/api"
    if not http_ok(f"{api}/health"):
        raise PrefectApiError(f"the Prefect server `evosyn up` started for {root} (pid {svc.pid}, {svc.url}) does "
                              f"not answer {api}/health; see its log {svc.log}, or restart it with "
                              "`evosyn down` and `evosyn up`")
    return api


def _runs_prefect(pid: int) -> bool:
    """Whether ``pid`` is (still) a Prefect process, not a later program that got the same PID."""
    import psutil  # the recorded server only

    try:
        return "prefect" in " ".join(psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        return False


def _use(api: str) -> None:
    os.environ["PREFECT_API_URL"] = api  # also for any subprocess this command starts
    if "prefect.context" in sys.modules:  # settings already loaded: let them see the new value
        import prefect.context

        prefect.context.refresh_global_settings_context()


def ensure_prefect_api(root: Path, timeouts: Sequence[float] | None = None,
                       meanwhile: Callable[[], object] | None = None) -> str:
    """Make sure a Prefect API answers before any flow runs; returns its URL. Raises PrefectApiError.

    ``meanwhile``: the caller's own start-up work (its imports), done in this thread while a temporary server
    boots in its own process, so that the two overlap; when no server is started, it is done first.
    """
    bound_client_retries()
    env_url = os.environ.get("PREFECT_API_URL", "").strip().rstrip("/")
    recorded = None if env_url else recorded_api(root)
    if env_url or recorded:
        if meanwhile is not None:
            meanwhile()
        if env_url:
            return _answering(env_url, "PREFECT_API_URL")
        _use(recorded)
        return recorded
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    profile_url = (PREFECT_API_URL.value() or "").rstrip("/")
    if profile_url or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        if meanwhile is not None:
            meanwhile()
    if profile_url:
        return _answering(profile_url, "PREFECT_API_URL of the active Prefect profile")
    if not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        raise PrefectApiError("no Prefect API: PREFECT_API_URL is not set, no `evosyn up` server is recorded in "
                              f"{root}, and temporary servers are off (set PREFECT_SERVER_EPHEMERAL_ENABLED=true, "
                              "or start a server with `evosyn up`)")
    return start_temporary(timeouts, meanwhile).api


def bound_client_retries() -> None:
    """Prefect's client retries a request to its API (a refused connection once it had connected, 502, 503, 429)
    5 times with waits of 2, 4, ... 32 s (plus a fifth of jitter), each waiting up to 60 s for a reply: minutes
    before a server that went away is given up. Bounded here by the retry budget (``EVOSYN_SERVICE_RETRY_S``); a
    value the user set for Prefect's own settings wins. Also for the processes this command starts."""
    budget = retry_s()
    retries = 0
    while (2 ** (retries + 2) - 2) * 1.2 <= budget:  # the (r+1)-th retry's waits, at their longest
        retries += 1
    for var, value in (("PREFECT_CLIENT_MAX_RETRIES", retries), ("PREFECT_API_REQUEST_TIMEOUT", max(5.0, budget))):
        os.environ.setdefault(var, f"{value:g}")
    if "prefect.context" in sys.modules:  # settings already loaded: let them see the new values
        import prefect.context

        prefect.context.refresh_global_settings_context()


def api_down_line(exc: BaseException) -> str | None:
    """One line for a Prefect API that stopped answering mid-command (5xx after its retries, e.g. its database
    gone; a refused or timed-out connection); None when ``exc`` is no such failure."""
    api = os.environ.get("PREFECT_API_URL", "").rstrip("/")
    why = _api_failure(exc, api)
    if why is None:
        return None
    return (f"the Prefect server at {api.removesuffix('/api')} stopped answering ({why}) after its retries (up to "
            f"{retry_s():g} s: {RETRY_ENV}; a 5xx most often means its database is gone: under `evosyn up --db`, "
            "`evosyn down` then `evosyn up` restarts the stack)")


def _api_failure(exc: BaseException | None, api: str) -> str | None:
    """What in ``exc``'s chain says the Prefect API at ``api`` failed: a 5xx, or a connection to it that failed."""
    import httpx
    from prefect.exceptions import PrefectHTTPStatusError

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and api:
        seen.add(id(exc))
        if isinstance(exc, PrefectHTTPStatusError) and exc.response.status_code >= 500:
            return f"HTTP {exc.response.status_code} on {exc.request.method} {exc.request.url.path}"
        if isinstance(exc, httpx.TransportError):
            try:
                url = str(exc.request.url)
            except RuntimeError:  # an error raised without its request
                url = ""
            if url.startswith(api):
                return type(exc).__name__
        exc = exc.__cause__ or exc.__context__
    return None


def _answering(url: str, source: str) -> str:
    if not http_ok(f"{url}/health", timeout=10.0):
        raise PrefectApiError(f"{source}={url}: no Prefect API answers at {url}/health (start the server, "
                              "e.g. `evosyn up`, or unset PREFECT_API_URL to use a temporary one)")
    return url


@dataclass
class TemporaryServer:
    """A `prefect server start` of this command: its API URL, process and log (in a folder of its own)."""

    api: str
    proc: subprocess.Popen
    log: Path

    def stop(self) -> None:
        """End the server (idempotent) and remove its log folder."""
        servers.stop(self.proc, grace=5.0)
        shutil.rmtree(self.log.parent, ignore_errors=True)


def server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port)]


def start_temporary(timeouts: Sequence[float] | None = None,
                    meanwhile: Callable[[], object] | None = None) -> TemporaryServer:
    """Start a temporary Prefect server for this process (stopped at its exit) and point ``PREFECT_API_URL`` at
    it: one retry, then PrefectApiError.

    ``timeouts`` are the seconds each attempt may take (default: ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``
    twice). ``meanwhile``, the caller's own start-up work (its imports), runs in this process while the first
    attempt's server boots in its own, so that the two overlap instead of adding up.
    """
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    if timeouts is None:
        timeouts = (float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()),) * 2
    errors: list[str] = []
    env = {**TEMPORARY_SERVER_ENV, **os.environ}  # what the user set wins
    lock = _start_lock(sum(timeouts))
    try:
        for seconds in timeouts:
            began, port = time.monotonic(), free_port()
            log = Path(tempfile.mkdtemp(prefix="evosyn-prefect-server-")) / "server.log"
            server = TemporaryServer(f"http://{HOST}:{port}/api", servers.start(server_command(port), log, env=env,
                                                                             die_with_parent=True), log)
            try:
                if meanwhile is not None:
                    meanwhile()
                left = max(0.0, seconds - (time.monotonic() - began))
                # ours answering, not another command's server that took the same free port first
                wait_ready(server.proc, lambda: http_ok(f"{server.api}/health") and servers.listens(server.proc, port),
                           left, interval=0.1)
            except (ServerExited, ServerNotReady) as exc:
                tail = log_tail(log, n=1, limit=300)
                what = f"not ready within {seconds:g}s" if isinstance(exc, ServerNotReady) else f"the server {exc}"
                errors.append(what + (f": {tail}" if tail else ""))
                server.stop()  # the slow process ends, so the retry starts a fresh one
                continue
            except BaseException:  # the caller's own work failed (or an interrupt): its error, not the server's
                server.stop()
                raise
            finally:
                meanwhile = None  # done once, during the first attempt
            atexit.register(server.stop)
            _use(server.api)
            return server
    finally:
        if lock is not None:
            lock.release()
    tried = ", ".join(f"{s:g}s" for s in timeouts)
    raise PrefectApiError(f"the temporary Prefect API server did not start ({len(timeouts)} attempts of {tried}; "
                          f"last: {errors[-1]}); {FIX}")


def _start_lock(seconds: float):
    """The lock that lets starts on one PREFECT_HOME take turns; None when it cannot be had in time.

    It only spreads the load (Prefect's own start copes with a busy database, more slowly), so a
    PREFECT_HOME that cannot hold a lock file, or a start that keeps it too long, is no error.
    """
    from filelock import FileLock, Timeout
    from prefect.settings import PREFECT_HOME

    try:
        home = Path(PREFECT_HOME.value()).expanduser()
        home.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(home / ".evosyn-ephemeral-start.lock"))
        lock.acquire(timeout=seconds)
    except (OSError, Timeout):
        return None
    return lock
