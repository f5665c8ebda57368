"""A content-addressed, on-disk cache of model replies, so a rerun makes no request and costs nothing.

The key is the SHA-256 of the canonical JSON of everything that determines a
reply: provider, model, messages, output schema, tools, sampling parameters and
the attempt number (so a role that re-asks gets a fresh answer the first time,
and the same answers again on a rerun). Only the request and the normalized
reply are stored; never headers, so never an API key. Writes are atomic
(temp file, then rename), so a crash never leaves a half-written entry.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any


def request_key(request: dict[str, Any]) -> str:
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._made: set[Path] = set()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.path(key).read_text())["reply"]
        except (OSError, ValueError, KeyError, TypeError):  # missing or unreadable: ask the model again
            return None

    def put(self, key: str, request: dict[str, Any], reply: dict[str, Any]) -> None:
        path = self.path(key)
        if path.parent not in self._made:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(path.parent)
        tmp = path.parent / f".{key}.{uuid.uuid4().hex}.tmp"
        try:
            tmp.write_text(json.dumps({"key": key, "request": request, "reply": reply}, default=str))
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
