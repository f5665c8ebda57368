"""What a completion marker vouches for, and the checks that hold a store to it.

A stage's marker (``Store.mark_complete``) records, for each chunk file the stage wrote, its row count
and the SHA-256 of its bytes (``describe``). A chunk's files are the files named after the chunk, or
after the chunk and a suffix (``gen-ab12.parquet``, ``gen-ab12-rollout.parquet``), in every table of the
run's round but ``llm_calls``: call rows are a log, not a result (a redo replays its calls from the
cache, with new call ids), and a lost log is no reason to redo a stage.

``verify`` compares a marker with the files now on disk: a file missing, truncated (its footer cannot be
read), of another row count, or of other bytes is a problem, one line each. ``evosyn.tasks.stages.Ctx.done``
treats a chunk with a problem as not done, so ``--resume`` recomputes it (row-identically: the stages
are seeded and LLM replies cached); ``check`` (`evosyn store check`) runs the same over a whole root and
adds the files no marker vouches for that cannot be read at all. Markers written before this recorded
nothing: their chunks are trusted as before, and only read errors are found in them.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evosyn.storage import objectstore
from evosyn.storage.objectstore import is_object, source
from evosyn.storage.records import TABLES

if TYPE_CHECKING:
    from evosyn.storage.store import Store

UNVERIFIED = ("llm_calls",)
MTIME_MARGIN_NS = 50_000_000  # file times come from a coarse clock (a few ms behind time.time_ns)
_MARKER = re.compile(r"^run_id=(?P<run>[^/]+)/round=(?P<round>\d+)/(?P<name>[^/]+)\.done$")


@dataclass(frozen=True)
class Problem:
    """One fault of the store: where, what, and the markers whose chunks it breaks (none: no marker names it)."""

    path: Path
    what: str
    run_id: str = ""
    round: int = 0
    markers: tuple[Path, ...] = ()

    def line(self) -> str:
        where = f"run {self.run_id} round {self.round}: " if self.run_id else ""
        return f"{where}{self.path}: {self.what}"


def _sha256(path: Path) -> str:
    if is_object(path):
        return objectstore.sha256(path)
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(source(path)).num_rows


def _written_ns(path: Path) -> int:
    # an object's Last-Modified is in whole seconds, by the server's clock: its writer's time is in its metadata
    return objectstore.written_ns(path) if is_object(path) else path.stat().st_mtime_ns


def chunk_files(store: "Store", run_id: str, round: int, chunk: str) -> dict[str, Path]:
    """``table/file`` -> path of every file chunk ``chunk`` of ``run_id`` round ``round`` has now."""
    out = {}
    for table in TABLES:
        if table in UNVERIFIED:
            continue
        part = store.partition_dir(table, run_id, round)
        for path in (part / f"{chunk}.parquet", *sorted(part.glob(f"{chunk}-*.parquet"))):
            if path.is_file():
                out[f"{table}/{path.name}"] = path
    return out


def describe(store: "Store", run_id: str, round: int, chunk: str, since_ns: int | None = None) -> dict[str, dict]:
    """What the marker records of each file of the chunk: its rows and checksum.

    ``since_ns``: when the stage began (``time.time_ns``); only files written since are its own. A later stage
    writes files of the same chunk name (verify's ``chunk-ab12`` verdicts beside rollout's ``chunk-ab12``
    trajectories): a marker that vouched for another stage's files would be broken by that stage's every redo,
    and each redo would break the other's. The margin covers the file clock's coarser tick.
    """
    out = {}
    for name, path in chunk_files(store, run_id, round, chunk).items():
        try:
            if since_ns is not None and _written_ns(path) < since_ns - MTIME_MARGIN_NS:
                continue
            out[name] = {"rows": _rows(path), "sha256": _sha256(path)}
        except Exception:  # a file being replaced, or one another stage's redo will rewrite: not this stage's
            continue
    return out


def verify(store: "Store", marker: Path) -> list[Problem]:
    """The problems of the files ``marker`` vouches for (none for a marker that records no files)."""
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError) as exc:
        return [Problem(marker, f"unreadable completion marker ({type(exc).__name__})", markers=(marker,))]
    run_id, rnd = str(info.get("run_id", "")), int(info.get("round", 0))
    out = []
    for name, want in (info.get("files") or {}).items():
        table, _, file = name.partition("/")
        path = store.partition_dir(table, run_id, rnd) / file
        what = _file_problem(path, want)
        if what:
            out.append(Problem(path, what, run_id, rnd, (marker,)))
    return out


def _file_problem(path: Path, want: dict) -> str:
    if not path.is_file():
        return "missing (its marker records it)"
    try:
        rows = _rows(path)
    except Exception as exc:  # pyarrow's ArrowInvalid, an OSError: the footer cannot be read
        return f"truncated or not Parquet ({type(exc).__name__})"
    if rows != want.get("rows"):
        return f"holds {rows} rows, its marker records {want.get('rows')}"
    if _sha256(path) != want.get("sha256"):
        return "its bytes do not match the checksum its marker records"
    return ""


def markers(store: "Store") -> list[tuple[Path, str, int]]:
    """(path, run id, round) of every completion marker of the root."""
    out = []
    base = store.markers_dir.as_posix().rstrip("/") + "/"
    for path in sorted(store.markers_dir.glob("run_id=*/round=*/*.done")):
        m = _MARKER.match(path.as_posix().removeprefix(base))
        if m:
            out.append((path, m["run"], int(m["round"])))
    return out


def check(store: "Store") -> list[Problem]:
    """Every problem of the root: files a marker vouches for that do not match it, then any other chunk file
    that cannot be read."""
    found: dict[Path, Problem] = {}  # one line per file, however many markers vouch for it
    for marker, _, _ in markers(store):
        for p in verify(store, marker):
            have = found.get(p.path)
            found[p.path] = p if have is None else Problem(have.path, have.what, have.run_id, have.round,
                                                           have.markers + p.markers)
    for table in TABLES:
        for path in store.files(table):
            if path in found:
                continue
            try:
                _rows(path)
            except Exception as exc:
                run_id, rnd = _partition_of(path)
                found[path] = Problem(path, f"truncated or not Parquet ({type(exc).__name__})", run_id, rnd,
                                      _owners(store, path, run_id, rnd))
    return list(found.values())


def _partition_of(path: Path) -> tuple[str, int]:
    run = path.parent.parent.name.partition("=")[2]
    rnd = path.parent.name.partition("=")[2]
    return run, int(rnd) if rnd.isdigit() else 0


def _owners(store: "Store", path: Path, run_id: str, rnd: int) -> tuple[Path, ...]:
    """The markers of the chunk a file belongs to (``chunk-ab12-rollout`` belongs to ``chunk-ab12``)."""
    folder = store.markers_dir / f"run_id={run_id}" / f"round={rnd}"
    stem = path.stem
    return tuple(m for m in (sorted(folder.glob("*.done")) if store.remote or folder.is_dir() else [])
                 if (chunk := m.stem.partition(".")[2]) and (stem == chunk or stem.startswith(chunk + "-")))


def invalidate(problems: list[Problem]) -> list[Path]:
    """Make a resume redo each problem's chunk: its markers go (the stage then recomputes and rewrites the
    chunk's files), and so does the broken file itself, so that no reader meets it until then."""
    removed = []
    for p in problems:
        for target in (*p.markers, p.path):
            if target.exists():
                target.unlink()
                removed.append(target)
    return removed
