"""Atomic file writes, and reads that treat an unreadable artifact as missing.

Every file EvoSyn writes outside the Parquet tables (models, reports, exports,
``services.json``, summaries, cache entries) goes through here: the content is
written to a temp file in the destination's folder, flushed and fsynced, then
``os.replace``d over the destination and the folder fsynced. A crash at any
point leaves either the old file or the new one, never a partial one, and at
most a hidden ``.<name>.<hex>.tmp`` that a later write of the same path does
not see (and that the crash itself could not clean up).
"""
from __future__ import annotations

import json
import logging
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

log = logging.getLogger("evosyn.storage")
T = TypeVar("T")


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some filesystems (and platforms) do not open folders; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike[str], durable: bool = True) -> Iterator[Path]:
    """A temp path beside ``path`` for a library that writes to a path (joblib, pyarrow, matplotlib).

    When the block exits normally the temp file is fsynced and renamed over
    ``path``; when it raises, the temp file is removed and ``path`` is untouched.
    The temp name ends in ``.tmp``, so no glob of real artifacts (``*.parquet``,
    ``*.joblib``) ever sees it; a library that picks a format by the suffix
    must be told the format (``savefig(tmp, format="png")``).

    ``durable=False`` skips the two fsyncs: still atomic (a crashed process leaves the old file or
    the new one, since the page cache outlives it), but a power loss may lose the newest writes. Only
    for what is rebuilt when missing (cache entries), where the fsyncs were most of a write's time.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.{uuid.uuid4().hex}.tmp"
    try:
        yield tmp
        if durable:
            _fsync_file(tmp)
        os.replace(tmp, dest)
        if durable:
            _fsync_dir(dest.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_bytes(path: str | os.PathLike[str], data: bytes, durable: bool = True) -> Path:
    dest = Path(path)
    with atomic_path(dest, durable) as tmp:
        tmp.write_bytes(data)  # fsynced by atomic_path before the rename (when durable)
    return dest


def write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8", durable: bool = True) -> Path:
    return write_bytes(path, text.encode(encoding), durable)


def write_json(path: str | os.PathLike[str], obj: Any, durable: bool = True, **dumps: Any) -> Path:
    """``json.dumps(obj, **dumps)`` written atomically; serialising fails before anything is written."""
    return write_text(path, json.dumps(obj, **dumps), durable=durable)


def read_or_none(path: str | os.PathLike[str], load: Callable[[Path], T], what: str = "artifact") -> T | None:
    """``load(path)``, or None when the file is missing or cannot be read back.

    An unreadable file (truncated, corrupt, an old format) is treated as
    missing, so its producer rebuilds it; that is logged once, as a warning.
    """
    p = Path(path)
    if not p.is_file():
        return None
    try:
        return load(p)
    except Exception as exc:  # any failure to load means the same thing: rebuild it
        log.warning("unreadable %s %s (%s: %s): treated as missing and rebuilt", what, p, type(exc).__name__,
                    str(exc)[:200])
        return None
