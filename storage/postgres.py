"""PostgreSQL for the servers' own databases: the URL forms each client wants, one lock across machines.

A user names one database, ``postgresql://user:password@host:port/name``. Prefect's server keeps its tables
there (``postgresql+asyncpg://``, its async driver) and MLflow its tracking store in ``name_mlflow`` on the
same server (``postgresql+psycopg://``): the two cannot share one database, since both keep their schema
revision in a table named ``alembic_version``.

Schema builds are not safe to run twice at once (MLflow creates its tables, then runs its migrations;
Prefect migrates on start), and the processes that start them may be on different machines. So they run
under a PostgreSQL advisory lock (``pg_advisory_lock``), held by one connection for as long as the build
takes: whoever comes second waits, then finds the schema current.

The drivers are the ``postgres`` extra (``pip install 'evosyn[postgres]'``); they are imported only here
and only when a PostgreSQL URL is used. A password is registered with storage.redact as soon as a URL that
carries one is parsed, so no log line, row or report written afterwards shows it.
"""
from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from urllib.parse import unquote, urlsplit, urlunsplit

from evosyn.storage import redact

SCHEMES = ("postgresql", "postgres")
PREFECT_DRIVER, MLFLOW_DRIVER = "asyncpg", "psycopg"
MLFLOW_SUFFIX = "_mlflow"
EXTRA = "pip install 'evosyn[postgres]'"
NO_DATABASE = "3D000"  # SQLSTATE invalid_catalog_name: the database does not exist


class PostgresError(RuntimeError):
    """A PostgreSQL URL that cannot be used, or a server that refuses: one line, the password masked.
    ``sqlstate``: the server's error code, when it answered."""

    def __init__(self, message: str, sqlstate: str | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate


def is_postgres(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL database (any SQLAlchemy driver suffix)."""
    return bool(url) and urlsplit(url).scheme.split("+", 1)[0] in SCHEMES


def _with_scheme(url: str, scheme: str, database: str | None = None) -> str:
    parts = urlsplit(url)
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def libpq(url: str) -> str:
    """The plain ``postgresql://`` form libpq (psycopg) reads, whatever driver suffix ``url`` names."""
    return _with_scheme(url, "postgresql")


def masked(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages, logs and services.json)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].split(":", 1)[0]
    return urlunsplit((parts.scheme, f"{user}:{redact.MASK}@{netloc[2]}", parts.path, parts.query, ""))


def register_password(url: str | None) -> None:
    """Redact the password of ``url`` from everything this process writes from now on."""
    if url and is_postgres(url) and urlsplit(url).password:
        password = urlsplit(url).password
        redact.register(password, unquote(password))  # as written in the URL, and as the server sees it


def database(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def check(url: str) -> str:
    """``url`` if it names a PostgreSQL server and a database; raises PostgresError otherwise."""
    if not is_postgres(url):
        raise PostgresError(f"{masked(url)}: not a PostgreSQL URL (postgresql://user:password@host:port/database)")
    parts = urlsplit(url)
    if not parts.hostname or not database(url) or "/" in database(url):
        raise PostgresError(f"{masked(url)}: name a host and one database (postgresql://user:password@host:port/"
                            "database)")
    register_password(url)
    return url


def prefect_url(url: str) -> str:
    """PREFECT_API_DATABASE_CONNECTION_URL: the named database, through asyncpg."""
    return _with_scheme(check(url), f"postgresql+{PREFECT_DRIVER}")


def mlflow_url(url: str) -> str:
    """MLflow's backend store URI: ``<database>_mlflow`` on the same server, through psycopg (3)."""
    return _with_scheme(check(url), f"postgresql+{MLFLOW_DRIVER}", database(url) + MLFLOW_SUFFIX)


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise PostgresError(f"PostgreSQL needs its drivers: {EXTRA}") from None
    return psycopg


def connect(url: str, timeout: float = 10.0):
    """A psycopg connection (autocommit) to the database of ``url``; refusals are one masked line."""
    psycopg = _psycopg()
    try:
        return psycopg.connect(libpq(url), autocommit=True, connect_timeout=max(1, int(timeout)))
    except psycopg.Error as exc:
        raise PostgresError(f"{masked(url)}: {redact.redact(' '.join(str(exc).split()))[:300]}",
                            exc.sqlstate or _missing(exc)) from None


def _missing(exc: Exception) -> str | None:
    # a refused connection carries no SQLSTATE in psycopg (the server's FATAL is in the message only)
    return NO_DATABASE if "does not exist" in str(exc) and "database" in str(exc) else None


def create_database(url: str) -> bool:
    """Create the database of ``url`` (connecting to the server's ``postgres`` database) unless it exists;
    True when this call created it. Two callers at once: one creates it, the other finds it."""
    psycopg = _psycopg()
    from psycopg import errors, sql

    name = database(url)
    with connect(_with_scheme(url, "postgresql", "postgres")) as con:
        if con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return False
        try:
            con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except (errors.DuplicateDatabase, errors.UniqueViolation):  # created meanwhile by a concurrent start
            return False
        except psycopg.Error as exc:
            raise PostgresError(f"cannot create database {name} on {masked(url)} ({' '.join(str(exc).split())}); "
                                "create it, or grant CREATEDB to the user") from None
    return True


def ensure_database(url: str) -> None:
    """The database of ``url`` exists: reachable as it is, or created through the server's ``postgres``
    (by this call or by a concurrent one: either way it is then reachable)."""
    try:
        connect(url).close()
    except PostgresError as exc:
        if exc.sqlstate != NO_DATABASE:
            raise
        create_database(url)
        connect(url).close()


def _key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``name`` (the same on every machine)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


@contextlib.contextmanager
def advisory_lock(url: str, name: str, timeout: float = 600.0, poll: float = 0.5) -> Iterator[None]:
    """Hold PostgreSQL's session advisory lock ``name`` on the server of ``url`` (every process that asks for
    it, on any machine, waits its turn); a wait over ``timeout`` seconds raises PostgresError.

    A waiter asks again every ``poll`` seconds (``pg_try_advisory_lock``) rather than blocking in
    ``pg_advisory_lock``: a blocked statement holds a snapshot, and the holder's migrations (Prefect's
    ``CREATE INDEX CONCURRENTLY``) wait for every older snapshot to end, so holder and waiter would wait
    for each other for good (seen with three concurrent `evosyn up`; PostgreSQL cannot see that cycle,
    since the holder waits for its server in another process)."""
    deadline = time.monotonic() + timeout
    with connect(url) as con:
        while not con.execute("SELECT pg_try_advisory_lock(%s)", (_key(name),)).fetchone()[0]:
            if time.monotonic() >= deadline:
                raise PostgresError(f"waited {timeout:.0f}s for lock {name} on {masked(url)}: another start "
                                    "holds it")
            time.sleep(poll)
        try:
            yield
        finally:
            con.execute("SELECT pg_advisory_unlock(%s)", (_key(name),))
