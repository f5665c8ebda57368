"""Which Prefect API the flows of a command talk to, settled once before the first flow starts.

In order of preference:

1. ``PREFECT_API_URL`` (environment or active Prefect profile): it must answer ``/health``.
2. The Prefect server `evosyn up` recorded for this store root (``<root>/services.json``), when its
   process is alive and it answers: every run then shows in that server's UI, and no run pays for a
   server start of its own.
3. Prefect's temporary (ephemeral) server, the one Prefect itself would start on the first flow call
   (``SubprocessASGIServer``, a per-process singleton that the flow then reuses). It is started here,
   with a timeout per attempt and one retry after the slow process is stopped, so that a start that
   times out on a loaded machine is retried once and a final failure is one line, not a traceback
   from inside the first flow call. Starts sharing one ``PREFECT_HOME`` database take turns (a file
   lock), so concurrent first runs do not migrate the same sqlite file at once.
"""
from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from flows.services import alive, http_ok, load_state

STARTUP_TIMEOUT_VAR = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
# The temporary server serves this process's flows alone, which use no automations: its triggers and actions
# services (which evaluate every event a run sends; measured with cProfile, about a third of the server's CPU
# while a run lasts) stay off. The task-run recorder and event persister stay on: they are what the UI shows.
# A value the user set wins.
EPHEMERAL_SERVER_ENV = {"PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false"}
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
    import psutil

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
    return start_ephemeral(timeouts, meanwhile)


def _answering(url: str, source: str) -> str:
    if not http_ok(f"{url}/health", timeout=10.0):
        raise PrefectApiError(f"{source}={url}: no Prefect API answers at {url}/health (start the server, "
                              "e.g. `evosyn up`, or unset PREFECT_API_URL to use a temporary one)")
    return url


def start_ephemeral(timeouts: Sequence[float] | None = None, meanwhile: Callable[[], object] | None = None) -> str:
    """Start Prefect's temporary server (the one later flow calls reuse): one retry, then PrefectApiError.

    ``timeouts`` are the seconds each attempt may take (default: ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``
    twice). ``meanwhile`` runs in this thread during the first attempt (see ``ensure_prefect_api``).
    """
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    if timeouts is None:
        timeouts = (float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()),) * 2
    errors: list[str] = []
    lock = _start_lock(sum(timeouts))
    try:
        for seconds in timeouts:
            server = SubprocessASGIServer()
            try:
                with _server_env(EPHEMERAL_SERVER_ENV):
                    _start_beside(server, seconds, meanwhile)
                return server.api_url
            except _MeanwhileFailed as failed:  # the caller's own work failed: its error, not the server's
                server.stop()
                raise failed.__cause__ from None
            except Exception as exc:  # noqa: BLE001 - Prefect raises RuntimeError on a timeout, httpx errors else
                errors.append(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
                # end the slow process and forget the instance, so the retry starts a fresh one
                server.stop()
            finally:
                meanwhile = None  # done once, during the first attempt
    finally:
        if lock is not None:
            lock.release()
    tried = ", ".join(f"{s:g}s" for s in timeouts)
    raise PrefectApiError(f"the temporary Prefect API server did not start ({len(timeouts)} attempts of {tried}; "
                          f"last: {errors[-1]}); {FIX}")


class _MeanwhileFailed(Exception):
    """The caller's ``meanwhile`` raised (its exception is the cause)."""


def _start_beside(server, seconds: float, meanwhile: Callable[[], object] | None) -> None:
    """``server.start`` (a process launch, then polling its health) in a thread, ``meanwhile()`` in this one.

    The server boots in its own process, so its start-up and the caller's (imports, in the caller's process)
    overlap instead of adding up; the thread only launches and polls.
    """
    if meanwhile is None:
        server.start(timeout=seconds)
        return
    failed: list[BaseException] = []

    def start() -> None:
        try:
            server.start(timeout=seconds)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            failed.append(exc)

    thread = threading.Thread(target=start, name="evosyn-prefect-api-start", daemon=True)
    thread.start()
    try:
        meanwhile()
    except BaseException as exc:
        thread.join()
        raise _MeanwhileFailed() from exc
    thread.join()
    if failed:
        raise failed[0]


@contextmanager
def _server_env(values: dict[str, str]) -> Iterator[None]:
    """``values`` in the environment the server process inherits (not this process's: it runs no services)."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


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
