"""A content-addressed, on-disk cache of model replies, so a rerun makes no request and costs nothing.

The key is the SHA-256 of the canonical JSON of everything that determines a
reply: provider, model, messages, output schema, tools, sampling parameters and
the attempt number (so a role that re-asks gets a fresh answer the first time,
and the same answers again on a rerun). Only the request and the normalized
reply are stored; never headers, so never an API key.

Layout: append-only logs, ``<root>/log-<pid>-<random>.jsonl``, one entry
``{"key": ..., "request": ..., "reply": ...}`` per line. Each process writes a
log of its own (one ``write`` per entry: no file to create, rename or sync per
reply, which was most of a call's client time in ``evosyn bench llm``), so
writers never interleave. A line a crash tore (no newline at its end) or that
does not parse reads as missing: that reply is asked again and appended again;
the newest entry of a key wins. Logs are indexed on first use (key, offset);
entries appended later by other processes are seen by a later process. Caches
of the older one-file-per-entry layout (``<root>/<k[:2]>/<key>.json``) are still
read (their file names listed with that index). Not fsynced: a power cut may
lose the newest entries, which are asked again.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evosyn.storage.atomic import read_or_none

log = logging.getLogger(__name__)
_PREFIX = b'{"key":"'
_KEY_END = len(_PREFIX) + 64


def request_blob(request: dict[str, Any]) -> str:
    """The canonical JSON of a request: what its key hashes, and what its entry stores."""
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def key_of(blob: str) -> str:
    return hashlib.sha256(blob.encode()).hexdigest()


def request_key(request: dict[str, Any]) -> str:
    return key_of(request_blob(request))


class _Logs:
    """The logs of one cache folder in this process: an index of every entry, and this process's own log."""

    def __init__(self, root: Path):
        self.root = root
        self.lock = threading.Lock()
        # key -> where its entries are (log path, offset, length), oldest first
        self.index: dict[str, list[tuple[str, int, int]]] | None = None
        self.older: frozenset[str] = frozenset()  # keys of the older layout's files (nothing writes them now)
        self._fd: int | None = None
        self._fd_pid = 0
        self._own = ""
        self._size = 0

    def _load(self) -> dict[str, list[tuple[str, int, int]]]:
        if self.index is None:
            index: dict[str, list[tuple[str, int, int]]] = {}
            for path in sorted(self.root.glob("log-*.jsonl"), key=_age):
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                offset = 0
                for line in data.split(b"\n")[:-1]:  # the last piece has no newline: empty, or torn
                    if line.startswith(_PREFIX) and len(line) > _KEY_END:
                        key = line[len(_PREFIX):_KEY_END].decode("ascii", "replace")
                        index.setdefault(key, []).append((str(path), offset, len(line)))
                    offset += len(line) + 1
            self.older = frozenset(p.stem for p in self.root.glob("??/*.json"))
            self.index = index
        return self.index

    def has_older(self, key: str) -> bool:
        with self.lock:
            self._load()
            return key in self.older

    def get(self, key: str) -> list[bytes]:
        """The key's entries as stored, newest first (a caller takes the first that parses)."""
        with self.lock:
            where = list(self._load().get(key, ()))
        out = []
        for path, offset, length in reversed(where):
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    out.append(f.read(length))
            except OSError:
                continue
        return out

    def append(self, key: str, line: bytes) -> None:
        with self.lock:
            index = self._load()
            if self._fd is not None and (self._fd_pid != os.getpid() or os.fstat(self._fd).st_nlink == 0):
                if self._fd_pid == os.getpid():
                    os.close(self._fd)
                self._fd = None  # a forked child, or the log was deleted under us: a new log
            if self._fd is None:
                self.root.mkdir(parents=True, exist_ok=True)
                self._own = str(self.root / f"log-{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl")
                self._fd = os.open(self._own, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o644)
                self._fd_pid, self._size = os.getpid(), 0
            written = os.write(self._fd, line + b"\n")
            if written != len(line) + 1:  # a short write (disk full): the torn line is skipped when read
                self._size += written
                raise OSError(f"short write to {self._own}")
            index.setdefault(key, []).append((self._own, self._size, len(line)))
            self._size += written


def _age(path: Path) -> tuple[float, str]:
    try:
        return path.stat().st_mtime, path.name
    except OSError:
        return 0.0, path.name


def _reply(line: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)["reply"]
    except Exception:
        return None
    return entry if isinstance(entry, dict) else None


_logs: dict[str, _Logs] = {}
_logs_lock = threading.Lock()


def _logs_of(root: Path) -> _Logs:
    key = str(root.absolute())
    with _logs_lock:
        if key not in _logs:
            _logs[key] = _Logs(root)
        return _logs[key]


class ResponseCache:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._logs = _logs_of(self.root)

    def path(self, key: str) -> Path:
        """Where the older layout kept an entry (still read)."""
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        # missing: ask the model; unreadable (a torn or foreign entry): logged, then asked again and rewritten
        lines = self._logs.get(key)
        for line in lines:
            entry = _reply(line)
            if entry is not None:
                return entry
        if lines:
            log.warning("unreadable cache entry %s: treated as missing", key[:12])
            return None
        if not self._logs.has_older(key):  # a miss: no file to look for (a stat per call, once per process here)
            return None
        entry = read_or_none(self.path(key), lambda p: json.loads(p.read_text())["reply"], "cache entry")
        return entry if isinstance(entry, dict) else None

    def put(self, key: str, request: dict[str, Any] | str, reply: dict[str, Any]) -> None:
        """``request``: the request, or its ``request_blob`` when the caller has it already."""
        blob = request if isinstance(request, str) else request_blob(request)
        line = f'{{"key":"{key}","request":{blob},"reply":{json.dumps(reply, ensure_ascii=False, default=str)}}}'
        self._logs.append(key, line.encode())

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every readable entry (both layouts), the newest of each key."""
        seen = set()
        with self._logs.lock:
            keys = list(self._logs._load())
        for key in keys:
            for line in self._logs.get(key):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    seen.add(key)
                    yield entry
                    break
        for path in sorted(self.root.glob("??/*.json")):
            if path.stem not in seen:
                entry = read_or_none(path, lambda p: json.loads(p.read_text()), "cache entry")
                if isinstance(entry, dict):
                    yield entry
