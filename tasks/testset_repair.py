"""A fixed test set (or probe set) repaired: its broken chunks rebuilt, and shown to be what they were.

A set is built once and then read by every run that tests on it, so a chunk of it that `evosyn store check`
finds broken must come back row-identical, or the repair must say what was lost. A run's resume cannot do
it: the set's completion marker still stands, so every run takes the set as built and reads it one chunk
short. ``rebuild`` takes the broken files away with their markers and the set's own marker, resumes the build
(``build_test_set``: seeded, each attempt a function of the rows already written, so it redoes exactly the
missing chunks), then compares every file of the set with what the markers recorded before: the same rows
and bytes, or one line per file that differs.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evosyn.storage.chunks import UNVERIFIED, Problem, fingerprint, invalidate, markers
from evosyn.storage.locks import store_lock
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from evosyn.tasks.testset import (
    KINDS,
    TEST_SET_STAGE,
    Kind,
    build_test_set,
    test_set_run_id,
)

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

SET_NAMES = ("testset", "probeset")  # tasks/testset.py (fixed test sets), tasks/loop.py (probe sets)
_ID = re.compile(rf"^(?P<name>{'|'.join(SET_NAMES)})-(?P<kind>{'|'.join(KINDS)})-(?P<rest>.+)-s(?P<seed>\d+)"
                 r"-n(?P<n>\d+)$")


class SetRepairError(RuntimeError):
    """A set's broken chunk cannot be rebuilt here: one line naming the set, what is lost, and why."""


@dataclass(frozen=True)
class SetBuild:
    """What built a finished set: the arguments of ``build_test_set`` (and the domain's data folder)."""

    run_id: str
    domain: str
    kind: Kind
    n: int
    seed: int
    name: str
    data_source: str = ""


def is_set(run_id: str) -> bool:
    return _ID.match(run_id) is not None


def build_of(store: Store, run_id: str) -> SetBuild | None:
    """What built the finished set ``run_id``; None for a set not marked finished (its build, resumed by the
    next run that uses it, redoes what is missing). Its marker records it; a marker written before that: its
    id and its report's generator version say it, unless the set was built on a data folder."""
    path = store.marker_path(TEST_SET_STAGE, run_id, 0)
    if not path.is_file():
        return None
    info = json.loads(path.read_text())
    if "build" in info:
        return SetBuild(run_id=run_id, **info["build"])
    m = _ID.match(run_id)
    version = str(info.get("report", {}).get("generator_version", ""))
    domain, sep, tail = m["rest"].rpartition(f"-g{version}") if m and version else ("", "", "")
    if not sep or not domain:
        raise SetRepairError(f"test set {run_id}: its marker does not say which domain and generator built it")
    if tail:  # -d<digest of the data folder>: the folder itself is not in the id
        raise SetRepairError(f"test set {run_id}: built on a data folder its marker does not name (an older "
                             "version's marker)")
    return SetBuild(run_id, domain, m["kind"], int(m["n"]), int(m["seed"]), m["name"])


def _files(store: Store, run_id: str) -> dict[str, object]:
    """``table/file`` -> path of each file of the set (but its call logs: see storage/chunks.py)."""
    return {f"{t}/{p.name}": p for t in TABLES if t not in UNVERIFIED for p in store.files(t, run_id, 0)}


def _recorded(store: Store, run_id: str) -> dict[str, dict]:
    """``table/file`` -> rows and checksum, as the set's markers record them."""
    out: dict[str, dict] = {}
    for marker, rid, _ in markers(store):
        if rid == run_id:
            out.update(json.loads(marker.read_text()).get("files") or {})
    return out


def rebuild(store: Store, env: Domain, build: SetBuild, problems: list[Problem]) -> list[str]:
    """Rebuild the set's chunks that ``problems`` (its broken files) break; one line per file that did not come
    back as its marker recorded it (none: the set is row-identical)."""
    now = test_set_run_id(env, build.seed, build.n, build.kind, build.name)
    if now != build.run_id:
        raise SetRepairError(f"test set {build.run_id}: the {env.name} pack now builds {now} instead (its generator "
                             "version changed since)")
    broken = {p.path for p in problems}
    with store_lock(store.location, build.run_id):  # no run builds or reads it half-made meanwhile
        before = _recorded(store, build.run_id)
        unrecorded = {name for name, path in _files(store, build.run_id).items() if path in broken} - set(before)
        before.update({name: fingerprint(path) for name, path in _files(store, build.run_id).items()
                       if name not in before and path not in broken})
        invalidate(problems)
        store.marker_path(TEST_SET_STAGE, build.run_id, 0).unlink(missing_ok=True)
        build_test_set(store, env, build.n, build.seed, build.kind, build.name)
        after = {name: fingerprint(path) for name, path in _files(store, build.run_id).items()}
    lines = []
    for name in sorted(set(before) | set(after)):
        was, got = before.get(name), after.get(name)
        if name in unrecorded:
            lines.append(f"{name}: its marker recorded no checksum, so it cannot be shown to be what it was")
        elif got is None:
            lines.append(f"{name} ({was['rows']} rows) did not come back")
        elif was is None:
            lines.append(f"{name} ({got['rows']} rows) is new")
        elif was["rows"] != got["rows"]:
            lines.append(f"{name} came back with {got['rows']} rows, not {was['rows']}")
        elif was["sha256"] != got["sha256"]:
            lines.append(f"{name} came back with other bytes ({got['rows']} rows)")
    return lines
