"""A real PostgreSQL 15 for the tests: one server per test session (per xdist worker), made by the code
`evosyn up --db local` runs (flows/local_postgres.py: initdb into a temporary folder, the server on a free port
of 127.0.0.1; under root as the ``postgres`` account; a scratch cluster that syncs nothing to disk), stopped at the session's end, also after failing
tests, and checked gone.

Without PostgreSQL's binaries (Debian's ``postgresql-15``) the tests that ask for it are skipped, unless
``EVOSYN_REQUIRE_POSTGRES`` is set (CI), where they fail.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest


def _require(why: str) -> None:
    if os.environ.get("EVOSYN_REQUIRE_POSTGRES"):
        pytest.fail(why + "; EVOSYN_REQUIRE_POSTGRES is set")
    pytest.skip(why)


class PgServer:
    """The session's server: its root (the managed cluster's store root), PID, port and superuser URL."""

    def __init__(self, root: Path, pid: int, port: int, url: str):
        self.root, self.pid, self.port, self.url = root, pid, port, url

    def database(self, prefix: str = "t") -> str:
        """The URL of a fresh, empty database name (created by whoever connects first: storage/postgres.py)."""
        return f"{self.url.rsplit('/', 1)[0]}/{prefix}_{uuid.uuid4().hex[:10]}"


def reachable_dir(prefix: str) -> Path:
    """A new folder the ``postgres`` account can reach (PostgreSQL's binaries and psycopg checked first): not under
    pytest's 0700 tmp folders, since run by root the server runs as ``postgres``. The caller removes it."""
    pytest.importorskip("psycopg", reason="the postgres extra (pip install -e '.[dev]')")
    from evosyn.flows import local_postgres

    try:
        local_postgres.bindir()
    except local_postgres.LocalPostgresError as exc:
        _require(str(exc))
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="session")
def pg_server():
    from evosyn.flows import local_postgres
    from evosyn.flows.services import alive, family

    root = reachable_dir("evosyn-test-pg-")
    try:
        pid, port = local_postgres.start(root, root / "postgres.log", timeout=120, durable=False)
    except local_postgres.LocalPostgresError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(exc))
    procs = family({pid}) | {pid}
    try:
        yield PgServer(root, pid, port, local_postgres.url(root, port))
    finally:
        left = local_postgres.stop(pid, grace=30)
        gone = not left and not [p for p in procs if alive(p)] and not family({pid})
        shutil.rmtree(root, ignore_errors=True)
        assert gone, f"PostgreSQL (pid {pid}) survived its stop: {sorted(left)}"
