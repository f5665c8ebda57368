"""The local MLflow database, created crash-safe: built aside, then moved into place.

MLflow builds a sqlite tracking database the first time a client opens it: it creates the tables, then
runs some fifty schema migrations, several of which copy a table through ``_alembic_tmp_<name>``. A
process killed in that window (about a second, several under load), or a disk that fills there, leaves
a half-made schema that every later open fails on ("table _alembic_tmp_experiments already exists"):
the store root is broken for good. So a new database is built in a hidden temp file beside the final
one (``.mlflow.db.<hex>.tmp``), fsynced, and renamed over ``mlflow.db`` only when MLflow has opened it
complete: a crash anywhere leaves either no database (the next run builds it) or a complete one.

A database that is already half-made (left by a version without this, or by a copy interrupted
elsewhere: a migration's ``_alembic_tmp_`` table left, tables missing, a revision short of MLflow's
head) and that holds no run is moved aside to ``mlflow.db.broken-<n>`` and built again. One that holds
runs is never touched: if MLflow cannot open it, that is one line naming the file and the fix.

A PostgreSQL store (``postgresql+psycopg://``: `evosyn up --db`, or a shared one several machines log to) is
built by the first client that opens it, under a PostgreSQL advisory lock (storage/postgres.py), so that
concurrent first runs on any machine do not build the same schema at once; its database is created when
missing. Any other tracking URI (a server) is left to MLflow.
"""
from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evosyn.storage.atomic import atomic_path
from evosyn.storage.faults import fault_zone

log = logging.getLogger("evosyn.storage")


class TrackingStoreError(RuntimeError):
    """The MLflow database cannot be opened and holds runs: one line, no automatic repair."""


def sqlite_file(uri: str) -> Path | None:
    """The database file of a ``sqlite:///path`` URI; None for any other URI (or an in-memory database)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def _open(uri: str) -> None:
    """Open the database the way every later client does (MLflow builds or migrates it; raises if it cannot)."""
    from mlflow.tracking import MlflowClient

    # MLflow says "Creating initial MLflow database tables..." and "Updating database tables" at INFO on stderr
    # (its own handler, level INFO) whenever a database is built: not news to a user whose first run just began.
    # Its own logger's level keeps them out; a warning or an error of the build still shows
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    MlflowClient(tracking_uri=uri).search_experiments(max_results=1)


def head_revision() -> str:
    """The schema revision this MLflow builds (alembic's head of MLflow's migration scripts).

    MLflow has no public way to name it (only its private ``mlflow.store.db.utils``), so this one function
    reads the migration folder MLflow ships, with alembic's public API; tests/storage/test_mlflow_db.py
    fails if it stops naming the revision MLflow records in a database it builds."""
    from importlib.resources import files

    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(files("mlflow.store") / "db_migrations")).get_current_head()


def half_made(path: Path) -> str | None:
    """Why the database at ``path`` is a half-made one to rebuild, or None (complete, or it holds runs).

    Read with sqlite3, not MLflow: MLflow keeps an engine per URI for the life of the process, and one that
    opened the broken file would go on reading it after the rebuild replaced it.
    """
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "runs" in tables and con.execute("SELECT count(*) FROM runs").fetchone()[0]:
                return None  # a database with runs is the user's: never rebuilt (MLflow says what is wrong)
            versions = [r[0] for r in con.execute("SELECT version_num FROM alembic_version")] \
                if "alembic_version" in tables else []
        finally:
            con.close()
    except sqlite3.Error as exc:
        return f"not a readable sqlite database ({exc})"
    leftover = sorted(t for t in tables if t.startswith("_alembic_tmp_"))
    if leftover:
        return f"a migration was cut off: {leftover[0]} is left"
    if {"experiments", "runs"} - tables or len(versions) != 1:
        return "its schema was never finished"
    if versions[0] != head_revision():
        return f"its schema stopped at revision {versions[0]}"
    return None


def open_error(uri: str, exc: BaseException) -> TrackingStoreError:
    """The one line for a tracking database MLflow cannot open (one that holds runs: never rebuilt)."""
    from evosyn.storage.postgres import masked

    why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    path = sqlite_file(uri)
    if path is None:
        return TrackingStoreError(f"MLflow tracking store {masked(uri)} cannot be used ({why})")
    return TrackingStoreError(
        f"MLflow database {path} cannot be opened ({why}); it holds runs, so it is not rebuilt: back it up and "
        f"run `mlflow db upgrade sqlite:///{path}`, or move it away (the store's tables keep every row; only "
        "MLflow's view of the runs is lost)")


def _aside(path: Path) -> Path:
    n = 1
    while (target := path.with_name(f"{path.name}.broken-{n}")).exists():
        n += 1
    return target


@contextmanager
def _unsynced(tmp: Path) -> Iterator[None]:
    """SQLite's ``synchronous = OFF`` on the connections MLflow opens to ``tmp`` while it builds it.

    Each of MLflow's fifty migrations commits on its own, and each commit waits for the disk (about 7 s of a
    first run's 8 on this machine's disk, 1 s on tmpfs). The file under construction is never opened by
    anyone else and is fsynced once, whole, before it is renamed into place (``atomic_path``), so those
    waits buy nothing: a crash mid-build leaves only a temp file, as before. Set with SQLAlchemy's
    ``connect`` event (its documented way to set a pragma), only on connections to ``tmp``.
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    target = tmp.resolve()

    def pragma(dbapi_connection, _record) -> None:
        cur = dbapi_connection.cursor()
        try:
            files = [row[2] for row in cur.execute("PRAGMA database_list")]
            if any(f and Path(f).resolve() == target for f in files):  # as sqlite names it (a link resolved)
                cur.execute("PRAGMA synchronous = OFF")
        finally:
            cur.close()

    event.listen(Engine, "connect", pragma)
    try:
        yield
    finally:
        event.remove(Engine, "connect", pragma)


def _build_aside(path: Path) -> None:
    """Build a complete database in a temp file beside ``path`` (fsynced), then rename it into place."""
    with atomic_path(path) as tmp:
        try:
            with fault_zone("mlflow-init"), _unsynced(tmp):  # a fault test's kill or full disk, in MLflow's build
                _open(f"sqlite:///{tmp}")
        finally:
            tmp.with_name(tmp.name + "-journal").unlink(missing_ok=True)  # a failed build's rollback journal


def _clean_temp(folder: Path, name: str) -> None:
    """Temp databases of builds a crash cut off (the caller holds the lock: no build of ours is running)."""
    for left in folder.glob(f".{name}.*.tmp*"):
        left.unlink(missing_ok=True)


def ensure_tracking_db(uri: str) -> None:
    """Make a local sqlite tracking database complete before any client opens it (the caller holds the lock).

    Raises whatever the build raises (``OSError``, sqlite's "disk is full") with nothing left in place.
    """
    from evosyn.storage import postgres

    if postgres.is_postgres(uri):
        postgres.ensure_database(uri)
        with postgres.advisory_lock(uri, "evosyn-mlflow-schema"):
            _open(uri)
        return
    path = sqlite_file(uri)
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _clean_temp(path.parent, path.name)
    if not path.exists() or path.stat().st_size == 0:
        path.unlink(missing_ok=True)
        _build_aside(path)
        return
    why = half_made(path)
    if why is None:
        return
    moved = _aside(path)
    os.replace(path, moved)
    log.warning("MLflow database %s was half-made (%s) and held no run: moved to %s and built again", path, why,
                moved.name)
    _build_aside(path)
