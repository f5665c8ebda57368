"""A content-addressed, on-disk cache of model replies, so a rerun makes no request and costs nothing.

The key is the SHA-256 of the canonical JSON of everything that determines a
reply: provider, model, messages, output schema, tools, sampling parameters and
the attempt number (so a role that re-asks gets a fresh answer the first time,
and the same answers again on a rerun). Only the request and the normalized
reply are stored; never headers, so never an API key. Writes are atomic
(temp file, then rename), so a crash never leaves a half-written entry; they
are not fsynced (a power cut may lose the newest entries, which are asked again).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from storage import atomic
from storage.atomic import read_or_none


def request_key(request: dict[str, Any]) -> str:
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        # missing: ask the model; unreadable (a torn or foreign file): logged, then asked again and rewritten
        entry = read_or_none(self.path(key), lambda p: json.loads(p.read_text())["reply"], "cache entry")
        return entry if isinstance(entry, dict) else None

    def put(self, key: str, request: dict[str, Any], reply: dict[str, Any]) -> None:
        # atomic but not fsynced: an entry lost to a power cut is asked again (a torn one reads as
        # missing), and the two fsyncs were most of a call's client time (`evosyn bench llm`)
        atomic.write_json(self.path(key), {"key": key, "request": request, "reply": reply}, durable=False,
                          default=str)
