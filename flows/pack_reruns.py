"""Reruns after an edit of a user's pack: a new run (or synthesis pass) and one line naming the change; with
``--reuse``, the run the config had before the edit, as it was before pack versions were part of run ids.

Each run or pass of a user's pack records the pack's code version (``evosyn.envs.pack_version``) in a marker of
its own (``pack-version``, round 0) with its key: the id the run would have without the version. A later
command finds the earlier runs of the same key there (and the one of that very id, made before versions were
recorded), so it can name what changed. A built-in pack's runs record nothing: their ids never change.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable

import click

from evosyn.envs.pack_version import SHOWN
from evosyn.storage.store import Store

PACK_STAGE = "pack-version"


@dataclass(frozen=True)
class Earlier:
    run_id: str
    version: str | None  # None: made before the pack's version was recorded
    at: float


def short(version: str | None) -> str:
    return version[:SHOWN] if version else "unrecorded"


def earlier(store: Store, base: str, pattern: str, exists: Callable[[str], bool]) -> list[Earlier]:
    """The runs recorded under key ``base`` (their ids match ``pattern``), oldest first; the run whose id is the
    key itself, if it exists without a record, first of all."""
    found = []
    for path in store.markers_dir.glob(f"run_id={pattern}/round=0/{PACK_STAGE}.done"):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):  # a torn or unreadable marker names no earlier run
            continue
        if info.get("base") == base and isinstance(info.get("run_id"), str):
            found.append(Earlier(info["run_id"], info.get("pack"), float(info.get("at") or 0)))
    if all(e.run_id != base for e in found) and exists(base):
        found.append(Earlier(base, None, -1.0))
    return sorted(found, key=lambda e: e.at)


@dataclass(frozen=True)
class Rerun:
    """The id a command uses, the one line it prints (None: nothing to say), and what it records."""

    run_id: str
    line: str | None
    pack: str
    version: str | None
    base: str
    reused: bool = False  # an earlier run, continued by --reuse

    def record(self, store: Store) -> None:
        """Mark the run's pack version, once: a run continued by ``--reuse`` keeps the version it was made with."""
        if self.version is None or self.reused or store.is_complete(PACK_STAGE, self.run_id, 0):
            return
        store.mark_complete(PACK_STAGE, self.run_id, 0, domain=self.pack, pack=self.version, base=self.base,
                            at=time.time())

    def begin(self, store: Store | str) -> None:
        """As the run begins: its line (what changed in the pack) on stderr, and its pack version recorded."""
        if self.line:
            click.echo(self.line, err=True)
        self.record(store if isinstance(store, Store) else Store(store))


def choose(store: Store, kind: str, pack: str, version: str | None, base: str, new_id: str, pattern: str,
           exists: Callable[[str], bool], reuse: bool) -> Rerun:
    """``new_id`` (the id with the pack's ``version``) and a line when an earlier ``kind`` ("run", "pass") of
    the same key ``base`` was made by another version of the pack; ``reuse``: the latest such one instead."""
    if version is None:  # a built-in or installed pack: its id is its key
        return Rerun(new_id, None, pack, None, base)
    others = [e for e in earlier(store, base, pattern, exists) if e.run_id != new_id and e.version != version]
    if not others:
        return Rerun(new_id, None, pack, version, base)
    last = others[-1]
    if reuse:
        return Rerun(last.run_id, f"note: --reuse: continuing {kind} {last.run_id}, made by pack {pack} code "
                                  f"{short(last.version)} (the pack is now {short(version)})", pack, version, base,
                     reused=True)
    if exists(new_id):  # this version's own run is there already: a rerun of it, nothing changed since
        return Rerun(new_id, None, pack, version, base)
    if last.version is None:
        return Rerun(new_id, f"note: {kind} {last.run_id} of pack {pack} recorded no code version (made before "
                             f"pack versions were recorded): this is {kind} {new_id}, code {short(version)}; --reuse "
                             f"continues {last.run_id}", pack, version, base)
    return Rerun(new_id, f"note: pack {pack} changed since {kind} {last.run_id} (code {short(last.version)} -> "
                         f"{short(version)}): this is {kind} {new_id}; --reuse continues {last.run_id}",
                 pack, version, base)


def run_rerun(cfg, reuse: bool) -> Rerun:
    """``evosyn run``'s id for ``cfg`` (flows/run_id.py), after an edit of its pack and with ``--reuse``."""
    from evosyn.envs.pack_version import user_pack_version
    from evosyn.flows.run_id import run_id_for

    version = user_pack_version(cfg.domain)
    base = run_id_for(cfg, with_pack=False)
    if version is None:
        return Rerun(base, None, cfg.domain, None, base)
    store = Store(cfg.store_location(), create=False)

    def exists(rid: str) -> bool:
        return bool(store.read_records("runs", run_id=rid))

    return choose(store, "run", cfg.domain, version, base, run_id_for(cfg), f"{cfg.domain}-{cfg.arm}-s{cfg.seed}-*",
                  exists, reuse)
