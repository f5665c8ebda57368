"""File locks over a store root: one process at a time initializes a shared file.

Several runs may start on the same fresh root at once; whatever every one of them would create
(the MLflow database and its experiment, the DuckDB catalog, the Parquet schema files, the fixed
test set) is created under ``<root>/locks/<name>.lock``. The lock is an OS lock (``filelock``), so
a killed holder never leaves a stale lock behind. Callers check, take the lock, check again.

On an ``s3://`` root the lock is a lease object under the same name, taken by S3's conditional writes
(storage/leases.py), so it holds across machines.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from evosyn.storage.objectstore import is_remote, remote_path

LOCK_DIR = "locks"
DEFAULT_TIMEOUT_S = float(os.environ.get("EVOSYN_LOCK_TIMEOUT_S", "600"))
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class StoreLockTimeout(RuntimeError):
    """Another process held a store lock for longer than the timeout."""


def lock_path(root: str | os.PathLike[str], name: str) -> Path:
    if not _NAME.match(name):
        raise ValueError(f"lock name {name!r}: use letters, digits, '_', '.', '-'")
    if is_remote(root):
        return remote_path(str(root)) / LOCK_DIR / f"{name}.lock"
    return Path(root).expanduser() / LOCK_DIR / f"{name}.lock"


@contextmanager
def store_lock(root: str | os.PathLike[str], name: str, timeout: float | None = None) -> Iterator[FileLock]:
    """Hold ``<root>/locks/<name>.lock``; re-entrant within a thread, exclusive across processes and threads."""
    path = lock_path(root, name)
    wait = DEFAULT_TIMEOUT_S if timeout is None else timeout
    if is_remote(root):
        with _remote(path, wait):
            yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # one instance per path in this process, so a nested acquire in the same thread re-enters
    # instead of deadlocking on its own flock; other threads and processes still wait
    lock = FileLock(path, is_singleton=True)
    try:
        lock.acquire(timeout=wait)
    except Timeout:
        raise _timeout(path, wait) from None
    try:
        yield lock
    finally:
        lock.release()


def _timeout(path, wait: float) -> StoreLockTimeout:
    return StoreLockTimeout(f"{path}: held by another run for more than {wait:g} s; wait for it to "
                            "finish, or raise EVOSYN_LOCK_TIMEOUT_S")


@contextmanager
def _remote(path, wait: float) -> Iterator[None]:
    from evosyn.storage.leases import lease_lock

    try:
        cm = lease_lock(path, wait)
        cm.__enter__()
    except TimeoutError:
        raise _timeout(path, wait) from None
    try:
        yield
    except BaseException:
        cm.__exit__(*sys.exc_info())  # what stopped the holder (a store that does not answer: the lease lapses)
        raise
    cm.__exit__(None, None, None)
