"""Locks over an S3 store root: a lease object per lock, created and taken over by conditional writes.

``<root>/locks/<name>.lock`` is created with ``If-None-Match: *``: of any number of processes, on any number
of machines, exactly one create succeeds, and that one holds the lock. The object says who holds it and
until when; a thread of the holder renews it (``If-Match`` its ETag) a third of the way into each lease.
A holder that dies stops renewing: once its lease expired, another process takes it over by writing its
own lease ``If-Match`` the expired one's ETag, so of several takers exactly one wins. A holder on this
machine whose process is gone (a SIGKILL) is known dead at once, without waiting for the expiry. Release
deletes the object, only if it is still this holder's. S3 (since 2024), SeaweedFS, MinIO and Ceph honour
both conditions; tests/storage/test_leases.py shows that a second owner is refused against a real server.

The lease length is ``EVOSYN_LEASE_S`` (default 60 s): a process that stalls longer than that (a machine
suspended, a network cut) can lose its lock to another; each renewal checks it still holds it, and a lost
lease is logged loudly. A holder stopped by an object store that does not answer leaves its lease to lapse.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psutil

from evosyn.storage import objectstore

log = logging.getLogger("evosyn.storage")
POLL_S = 0.5  # between tries while another process holds the lock


def lease_s() -> float:
    return float(os.environ.get("EVOSYN_LEASE_S", "60"))


def _me() -> dict:
    proc = psutil.Process()
    return {"host": socket.gethostname(), "pid": proc.pid, "started": proc.create_time()}


def _dead_here(owner: dict) -> bool:
    """Whether the holder ran on this machine and its process is gone (its pid free, or reused since)."""
    if owner.get("host") != socket.gethostname():
        return False
    try:
        return psutil.Process(int(owner["pid"])).create_time() != owner.get("started")
    except (psutil.NoSuchProcess, KeyError, ValueError, TypeError):
        return True
    except psutil.Error:  # cannot tell (another user's process): it may be alive
        return False


@dataclass
class _Held:
    path: object  # the lock's UPath
    etag: str
    token: str
    depth: int = 1
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


# (lock object, thread) -> what this thread holds: re-entrant within a thread, exclusive across threads (a second
# thread of this process tries the conditional create like any other process, and waits)
_held: dict[tuple[str, int], _Held] = {}
_held_lock = threading.Lock()


def _body(token: str) -> bytes:
    return json.dumps({**_me(), "token": token, "thread": threading.get_ident(),
                       "expires": time.time() + lease_s()}).encode()


def _read(path) -> tuple[dict, str] | None:
    """(lease, ETag) of the lock object; None when there is none. The ETag is read first: a takeover is
    conditional on it, so a lease renewed between the two reads is never taken over."""
    info = objectstore.head(path)
    if info is None:
        return None
    try:
        lease = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError:  # not ours, or torn by a tool that does not write whole objects: treated as expired
        lease = {}
    except OSError as exc:
        if not _replaced(exc):
            raise
        return None  # another taker wrote it between the HEAD and the read: a race lost, as a released lock is
    return lease, info["etag"]


def _replaced(exc: OSError) -> bool:
    """s3fs's ``FileExpired``: the object changed between the size and ETag it read and the bytes (EBUSY). On a
    fresh store two first runs race for the same lock; the loser reads a lease its rival has just replaced."""
    return type(exc).__name__ == "FileExpired" or exc.errno == errno.EBUSY


def _try(path, token: str) -> str | None:
    """Take the lock once: create it, or take over an expired (or dead) holder's lease. The ETag, or None."""
    try:
        return objectstore.put(path, _body(token), if_none_match=True)
    except FileExistsError:
        pass
    found = _read(path)
    if found is None:  # released meanwhile: the next try creates it
        return None
    lease, etag = found
    if lease.get("expires", 0) > time.time() and not _dead_here(lease):
        return None
    try:
        etag = objectstore.put(path, _body(token), if_match=etag)
    except (FileExistsError, FileNotFoundError):  # another taker won, or it was released
        return None
    log.warning("%s: took over the lock of %s (pid %s), whose lease had expired or whose process is gone", path,
                lease.get("host", "?"), lease.get("pid", "?"))
    return etag


def _renew(held: _Held) -> None:
    every = lease_s() / 3
    while not held.stop.wait(every):
        try:
            held.etag = objectstore.put(held.path, _body(held.token), if_match=held.etag)
        except FileExistsError:
            log.error("%s: this process lost its lock (its lease expired and another process took it over)",
                      held.path)
            return
        except Exception as exc:  # noqa: BLE001 (a network error of any kind: the next renewal tries again)
            # a store that stopped answering is said once, by the request of the holder that meets it (one line)
            level = logging.DEBUG if objectstore.unreachable(exc) is not None else logging.WARNING
            log.log(level, "%s: renewing the lease failed (%s: %s)", held.path, type(exc).__name__, exc)


@contextmanager
def lease_lock(path, timeout: float) -> Iterator[None]:
    """Hold the lock object ``path`` (a UPath); ``TimeoutError`` after ``timeout`` seconds of another holder."""
    key = (str(path), threading.get_ident())
    with _held_lock:
        held = _held.get(key)
        if held is not None:
            held.depth += 1
    if held is None:
        token = uuid.uuid4().hex
        deadline = time.monotonic() + timeout
        while (etag := _try(path, token)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(str(path))
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())) or 0)
        held = _Held(path, etag, token)
        held.thread = threading.Thread(target=_renew, args=(held,), name=f"lease {path}", daemon=True)
        held.thread.start()
        with _held_lock:
            _held[key] = held
    try:
        yield
    except BaseException as exc:
        _release(key, abandon=objectstore.unreachable(exc) is not None)
        raise
    _release(key)


def _release(key: tuple[str, int], abandon: bool = False) -> None:
    """Delete the lock object if it is still this holder's. ``abandon``: the holder stopped because the object store
    does not answer; the lease is left to lapse (a process of this machine that resumes takes it over at once,
    this one being gone), not waited for."""
    with _held_lock:
        held = _held[key]
        held.depth -= 1
        if held.depth:
            return
        del _held[key]
    held.stop.set()
    if abandon:  # a renewal may be inside its retries: it ends with them, and renews nothing after the stop
        return
    if held.thread is not None:
        held.thread.join()
    found = _read(held.path)
    if found is not None and found[0].get("token") == held.token:
        # S3 has no conditional delete everywhere: checked just before, so a takeover in between (possible only
        # after this holder stalled past its lease) is the one thing that can be lost, and that lock was lost anyway
        held.path.unlink(missing_ok=True)
