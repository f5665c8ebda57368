"""A registry that also scans a temporary folder of user packs (``EVOSYN_DOMAINS``), undone after the test.

Use the ``user_registry`` fixture (import it into the test module): ``user_registry(folder)`` empties the
registry so the next lookup loads every pack again, the user's folder being ``folder``. A pack registers when
its module first runs, so the pack modules this test imports are removed after it, and those it found are put
back: the next test's registry loads the same packs.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evosyn.envs import packs


def _pack_module(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in (packs.USER_PACKAGE, packs.PACKAGE))


@pytest.fixture
def user_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], None]]:
    before = set(sys.modules)

    def use(folder: Path) -> None:
        monkeypatch.setenv(packs.USER_FOLDERS_ENV, str(folder))
        for attr, empty in (("_PACKS", {}), ("_INSTANCES", {}), ("_BROKEN", {}), ("_ERRORS", {}),
                            ("_loaded", False)):
            monkeypatch.setattr(packs, attr, empty)
        for name in [m for m in sys.modules if _pack_module(m)]:
            monkeypatch.delitem(sys.modules, name)  # a pack registers on import: import each afresh

    yield use
    for name in [m for m in sys.modules if _pack_module(m) and m not in before]:
        del sys.modules[name]  # imported by this test: the next load imports (and registers) it again
