"""A PostgreSQL server of one store root, for `evosyn up --db local`: initdb, start, stop.

The cluster lives in ``<root>/postgres/data`` and listens on 127.0.0.1 only, on a free port chosen at each
start; its superuser ``evosyn`` logs in with a random password (scram-sha-256) kept in
``<root>/postgres/password`` (mode 0600, like ~/.pgpass), so no other local account can use the database
even though the port is open on the machine. The binaries are PostgreSQL's own (Debian's ``postgresql-15``:
``/usr/lib/postgresql/15/bin``; ``EVOSYN_PG_BIN`` names another folder, or ``pg_config --bindir`` finds them).

PostgreSQL refuses to run as root. Run as root (a container, CI), the cluster belongs to the ``postgres``
account the Debian package creates, and its processes run as that account (``setpriv``): the account must be
able to reach the store root (every folder above it searchable).

The server is started in its own session by agents/servers.py (so that stopping it reaches every backend)
and stopped with PostgreSQL's fast shutdown (SIGINT: open sessions are rolled back, then it exits), which
`evosyn down` does after Prefect and MLflow, the server's clients, are gone.
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from evosyn.agents import servers
from evosyn.agents.servers import (
    HOST,
    ServerExited,
    ServerNotReady,
    family,
    free_port,
    log_tail,
    signal_all,
    wait_gone,
)
from evosyn.storage import postgres, redact

SUPERUSER = "evosyn"
DATABASE = "evosyn"
SYSTEM_ACCOUNT = "postgres"  # the owner of a cluster started by root (Debian's postgresql package makes it)
DEBIAN_BIN = Path("/usr/lib/postgresql/15/bin")


class LocalPostgresError(RuntimeError):
    """The managed server cannot be made, started or stopped: one line with its log's tail."""


def bindir() -> Path:
    """The folder holding initdb and postgres."""
    explicit = os.environ.get("EVOSYN_PG_BIN")
    candidates = [Path(explicit)] if explicit else [DEBIAN_BIN]
    if not explicit and shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        candidates.append(Path(out))
    for cand in candidates:
        if (cand / "initdb").is_file() and (cand / "postgres").is_file():
            return cand
    raise LocalPostgresError(f"no PostgreSQL server binaries in {', '.join(map(str, candidates))} (install the "
                             "Debian package postgresql-15, or set EVOSYN_PG_BIN to the folder holding initdb)")


def folder(root: Path) -> Path:
    return Path(root) / "postgres"


def made(root: Path) -> bool:
    """Whether ``root`` has a cluster of its own (made by an earlier `evosyn up --db local`)."""
    return (folder(root) / "data" / "PG_VERSION").is_file()


def _as_owner() -> list[str]:
    """The prefix that runs a command as the cluster's owner: nothing, or setpriv to ``postgres`` under root."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(SYSTEM_ACCOUNT)
    except KeyError:
        raise LocalPostgresError(f"PostgreSQL does not run as root, and there is no {SYSTEM_ACCOUNT} account to "
                                 "run it as (run evosyn as another user, or install postgresql-15)") from None
    return ["setpriv", f"--reuid={SYSTEM_ACCOUNT}", f"--regid={SYSTEM_ACCOUNT}", "--init-groups", "--"]


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, SYSTEM_ACCOUNT, SYSTEM_ACCOUNT)


def password(root: Path) -> str:
    return (folder(root) / "password").read_text().strip()


def url(root: Path, port: int) -> str:
    """The URL of the managed server's ``evosyn`` database, password included (masked wherever shown)."""
    pw = password(root)
    redact.register(pw)
    return f"postgresql://{SUPERUSER}:{pw}@{HOST}:{port}/{DATABASE}"


# a scratch cluster (the tests'): nothing is synced to disk, so a crash may lose it, and its many CREATE DATABASE
# and shutdown checkpoints cost no fsync (seconds each on a busy disk)
SCRATCH = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def init(root: Path, log: Path, durable: bool = True) -> None:
    """Create the cluster under ``<root>/postgres`` unless it is there (a half-made one is made again)."""
    home, data = folder(root), folder(root) / "data"
    if made(root) and (home / "password").is_file():
        return
    home.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(data, ignore_errors=True)  # an initdb cut off leaves a folder initdb refuses to reuse
    pw = secrets.token_urlsafe(24)
    secret = home / "password"
    secret.write_text(pw + "\n")
    secret.chmod(0o600)
    _own(home)
    # initdb reads the password from a file its own account can read: a temporary copy, removed at once
    with tempfile.NamedTemporaryFile("w", dir=home, prefix=".pwfile.", delete=True) as pwfile:
        pwfile.write(pw + "\n")
        pwfile.flush()
        _own(Path(pwfile.name))
        cmd = [*_as_owner(), str(bindir() / "initdb"), "-D", str(data), "-U", SUPERUSER, "--pwfile", pwfile.name,
               "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-instructions",
               *([] if durable else ["--no-sync"])]
        with open(log, "ab") as fh:
            done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False, timeout=300)
    if done.returncode != 0:
        raise LocalPostgresError(f"initdb failed in {data} (exit {done.returncode}); log {log}: "
                                 f"{log_tail(log)}" + (f" (the {SYSTEM_ACCOUNT} account must be able to reach "
                                                       f"{home})" if os.geteuid() == 0 else ""))


def start(root: Path, log: Path, timeout: float = 120.0, durable: bool = True) -> tuple[int, int]:
    """Start the cluster on a free port of 127.0.0.1, wait until its ``evosyn`` database answers; (pid, port).
    ``durable=False``: a scratch cluster (SCRATCH)."""
    root = Path(root).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    init(root, log, durable)
    data, port = folder(root) / "data", free_port()
    # TCP on loopback only, no Unix socket: /var/run/postgresql may not be writable, and a socket in a deep store
    # root would pass the 107-byte limit of a socket path
    cmd = [*_as_owner(), str(bindir() / "postgres"), "-D", str(data), "-p", str(port), "-c", f"listen_addresses={HOST}",
           "-c", "unix_socket_directories=", "-c", "max_connections=200",
           *[arg for k, v in ({} if durable else SCRATCH).items() for arg in ("-c", f"{k}={v}")]]
    proc = servers.start(cmd, log, die_with_parent=False)
    target = url(root, port)

    def ready() -> bool:
        try:
            postgres.connect(target.rsplit("/", 1)[0] + "/postgres", timeout=2).close()
        except postgres.PostgresError:
            return False
        return True

    try:
        servers.wait_ready(proc, ready, timeout)
        postgres.create_database(target)
    except (ServerExited, ServerNotReady, postgres.PostgresError) as exc:
        stop(proc.pid)
        proc.wait(timeout=10)
        raise LocalPostgresError(f"PostgreSQL in {data} did not start ({type(exc).__name__}); log {log}: "
                                 f"{log_tail(log)}") from None
    return proc.pid, port


def stop(pid: int, grace: float = 30.0) -> set[int]:
    """Fast shutdown (SIGINT to the postmaster), then whatever is left as any service; the PIDs that survived."""
    procs = family({pid}) | {pid}
    signal_all({pid}, signal.SIGINT)
    if not wait_gone(procs, grace) and not family({pid}):
        return set()
    return servers.stop(pid, grace=5.0)
