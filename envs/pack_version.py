"""The code version of a user's domain pack: a digest of its folder, so a run id covers the pack's code.

A built-in pack's version is evosyn's own (the ids of its runs never change with it), and an installed
(entry-point) pack's is its distribution's: neither contributes anything. A pack in one of the user's pack
folders (``EVOSYN_DOMAINS``, else ``./domains``: ``evosyn.envs.packs.user_folders``) is edited in place, so
its version is the digest of every file of its folder, code and data alike: sorted relative paths and
bytes, ``__pycache__`` left out (the interpreter writes it; it is no edit).
"""
from __future__ import annotations

import hashlib
import importlib
import pkgutil
import sys
from pathlib import Path

from evosyn.envs.packs import PACKAGE, USER_PACKAGE, DomainPack, registered, user_folders

SKIPPED = ("__pycache__",)  # folders written by the interpreter, not by the pack's author
SHOWN = 6  # hex digits of a version shown in a line (a run id's own digest has as many)


def folder_digest(folder: Path) -> str:
    """SHA-256 (first 12 hex digits) of every file under ``folder``: its path relative to the folder and its
    bytes, in sorted path order; ``__pycache__`` folders and compiled files are skipped."""
    files = sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*")
                   if p.is_file() and p.suffix not in (".pyc", ".pyo")
                   and not any(part in SKIPPED for part in p.relative_to(folder).parts))
    h = hashlib.sha256()
    for rel, path in files:
        data = path.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())  # lengths delimit: no two file sets hash alike by concatenation
        h.update(data)
    return h.hexdigest()[:12]


def builtin_names() -> set[str]:
    """The folders of the built-in packs (a user's folder of the same name is refused by the registry)."""
    return {i.name for i in pkgutil.iter_modules(importlib.import_module(PACKAGE).__path__)
            if i.ispkg and not i.name.startswith("_")}


def pack_folder(pack: DomainPack) -> Path | None:
    """The folder of a pack imported from the user's pack folders; None for a built-in or installed pack."""
    package = pack.package or ""
    if not package.startswith(USER_PACKAGE + "."):
        return None
    top = sys.modules.get(".".join(package.split(".")[:2]))  # evosyn_user_domains.<folder>, imported with the pack
    paths = list(getattr(top, "__path__", []))
    return Path(paths[0]) if paths else None


def pack_version(pack: DomainPack) -> str | None:
    """The code version of ``pack`` (``folder_digest`` of its folder); None for a built-in or installed pack."""
    folder = pack_folder(pack)
    return folder_digest(folder) if folder is not None else None


def user_pack_folder(name: str) -> Path | None:
    """The folder of the user's pack named ``name``, found from the name without importing any pack when the
    folder is named as the pack (as `evosyn new-domain` writes it; the first pack folder holding it wins, as
    on import); otherwise the registry is asked. None for a built-in or installed pack, or an unknown name."""
    if not name or name in builtin_names():
        return None
    for folder in user_folders():
        if (folder / name / "__init__.py").is_file():
            return folder / name
    pack = registered(name)  # a pack whose name is not its folder's: the registry knows it (this imports the packs)
    return pack_folder(pack) if pack is not None else None


def user_pack_version(name: str) -> str | None:
    """``pack_version`` of the pack named ``name`` (``user_pack_folder``), light enough for a run id."""
    folder = user_pack_folder(name)
    return folder_digest(folder) if folder is not None else None
