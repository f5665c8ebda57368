"""Shared benchmark plumbing: a results folder, machine facts, JSON output."""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

from storage import atomic


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S")}


def write_json(name: str, payload: dict[str, Any], output: str | os.PathLike[str] | None = None) -> Path:
    path = Path(output) if output else Path("bench-results") / f"{name}.json"
    atomic.write_json(path, {"benchmark": name, "machine": machine(), **payload}, indent=2, default=str)
    return path
