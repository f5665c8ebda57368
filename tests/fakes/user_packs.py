"""A registry that also scans a temporary folder of user packs (``EVOSYN_DOMAINS``), undone after the test."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envs import packs


def fresh_registry(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Packs are loaded again on the next lookup, the user's folder being ``folder``; every change is undone."""
    monkeypatch.setenv(packs.USER_FOLDERS_ENV, str(folder))
    monkeypatch.setattr(packs, "_PACKS", {})
    monkeypatch.setattr(packs, "_INSTANCES", {})
    monkeypatch.setattr(packs, "_BROKEN", {})
    monkeypatch.setattr(packs, "_ERRORS", {})
    monkeypatch.setattr(packs, "_loaded", False)
    for name in [m for m in sys.modules if m == packs.USER_PACKAGE or m.startswith(packs.USER_PACKAGE + ".")
                 or m.startswith(packs.PACKAGE + ".")]:
        monkeypatch.delitem(sys.modules, name)  # a pack registers on import: import each afresh
