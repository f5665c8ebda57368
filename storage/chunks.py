"""What a completion marker vouches for, and the checks that hold a store to it.

A stage's marker (``Store.mark_complete``) records, for each chunk file the stage wrote, its row count
and the SHA-256 of its bytes (``describe``). A chunk's files are the files named after the chunk, or
after the chunk and a suffix (``gen-ab12.parquet``, ``gen-ab12-rollout.parquet``), in every table of the
run's round but ``llm_calls``: call rows are a log, not a result (a redo replays its calls from the
cache, with new call ids), and a lost log is no reason to redo a stage.

``verify`` compares a marker with the files now on disk: a file missing, truncated (its footer cannot be
read), of another row count, or of other bytes is a problem, one line each. ``evosyn.tasks.stages.Ctx.done``
treats a chunk with a problem as not done, so ``--resume`` recomputes it (row-identically: the stages
are seeded and LLM replies cached); ``check`` (`evosyn store check`) runs the same over a whole root, then
looks at every other Parquet file under ``tables/``: each must be vouched for, or it is a problem
(``Problem.unvouched``), which ``quarantine`` moves out of the tables (a file with other columns than its
table's makes every query of that table fail). A file is vouched for by

- a marker that records it (then ``verify`` holds it to the record);
- its name, for the files written without a marker by design (``_BY_DESIGN``: a run's own row, the call
  logs, ...), and the chunks of markers written before markers recorded their files (trusted as before);
  such a file must still be readable and hold only its table's columns;
- a run in progress: a stage writes its files, then its marker, so the files of a partition whose run holds
  its lock (``run-<id>``, a test set's ``<id>``, its ``dedup-<id>``) are in progress, not damage
  (``Findings.in_progress``), unless their columns are not the table's;
- the table's schema file (``run_id=/round=0/<fingerprint>.parquet``, storage/store.py; no rows).

A stage that stopped before its marker leaves files no marker vouches for: they are named as well (its
``--resume`` rewrites them; so does a rerun after ``--repair`` moved them away).
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
QUARANTINE = "quarantine"  # under the root (an S3 store's prefix): where `store check --repair` moves unvouched files
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
    unvouched: bool = False  # no marker vouches for the file: `quarantine` moves it away (nothing recomputes it)

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


def fingerprint(path: Path) -> dict:
    """What a marker records of a chunk file: its rows and the SHA-256 of its bytes."""
    return {"rows": _rows(path), "sha256": _sha256(path)}


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
            out[name] = fingerprint(path)
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


# Files their writers leave without a marker, by design: table -> (the rounds they are in, None: any; their names).
# A run's own row (rewritten at each change of its status: a marker would be stale after each) and its initial
# space (written before any stage); what `evosyn evaluate` writes outside a run's loop (``eval-<set>``,
# ``official-<split>-<hash>``); and the call logs (``llm_calls``): a stage flushes its calls before its marker, and
# a redo after a crash or a repair adds its calls to the chunk's log, never rewrites it (see the module doc).
_EVALUATED = re.compile(r"(eval|official)-[A-Za-z0-9_.\-]+")
_BY_DESIGN: dict[str, tuple[int | None, re.Pattern]] = {
    "runs": (0, re.compile(r"run")), "spaces": (0, re.compile(r"initial")),
    "evaluations": (None, _EVALUATED), "trajectories": (None, _EVALUATED),
    "llm_calls": (None, re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*"))}
_LAYOUT = re.compile(r"^(?P<table>[^/]+)/run_id=(?P<run>[^/]+)/round=(?P<round>\d+)/(?P<name>[^/]+)\.parquet$")
_SCHEMA_FILE = re.compile(r"^(?P<table>[^/]+)/(_schema/)?run_id=/round=0/[0-9a-f]{16}\.parquet$|^(?P<old>[^/]+)/_schema\.parquet$")


@dataclass
class Findings:
    """What ``check_root`` found: the problems, and the files of runs in progress (run id -> files) it let be."""

    problems: list[Problem]
    in_progress: dict[str, list[Path]]


def check(store: "Store") -> list[Problem]:
    """Every problem of the root (``check_root``)."""
    return check_root(store).problems


def check_root(store: "Store") -> Findings:
    """Files a marker vouches for that do not match it, then every other Parquet file under ``tables/``: one that
    cannot be read, holds other columns than its table's, or that nothing vouches for (the module doc)."""
    found: dict[Path, Problem] = {}  # one line per file, however many markers vouch for it
    recorded: set[Path] = set()
    legacy: dict[tuple[str, int], set[str]] = {}  # the chunks of markers that record no files (trusted by name)
    for marker, run_id, rnd in markers(store):
        stage, _, chunk = marker.stem.partition(".")
        try:
            files = json.loads(marker.read_text()).get("files")
        except (OSError, ValueError):
            files = None
        if files is None:
            legacy.setdefault((run_id, rnd), set()).add(chunk or stage)
        recorded.update(store.partition_dir(n.partition("/")[0], run_id, rnd) / n.partition("/")[2]
                        for n in files or {} if n.partition("/")[0] in TABLES)
        for p in verify(store, marker):
            have = found.get(p.path)
            found[p.path] = p if have is None else Problem(have.path, have.what, have.run_id, have.round,
                                                           have.markers + p.markers)
    in_progress: dict[str, list[Path]] = {}
    live: dict[str, bool] = {}
    base = store.tables_dir.as_posix().rstrip("/") + "/"
    for path in sorted(store.tables_dir.rglob("*.parquet")):
        rel = path.as_posix().removeprefix(base)
        if path in found:
            continue
        layout, schema_file = _LAYOUT.match(rel), _SCHEMA_FILE.match(rel)
        if path in recorded:  # its marker's record holds it (above)
            continue
        table = layout["table"] if layout else (schema_file["table"] or schema_file["old"]) if schema_file else \
            rel.partition("/")[0]
        run_id, rnd = (layout["run"], int(layout["round"])) if layout else ("", 0)
        what = _content_problem(path, table)
        if what.startswith("truncated"):
            found[path] = Problem(path, what, run_id, rnd, _owners(store, path, run_id, rnd) if layout else ())
            continue
        if schema_file:
            if what or _rows(path):
                found[path] = Problem(path, "no completion marker vouches for it, and it is no schema file of its "
                                      f"table ({what or 'it holds rows'})", unvouched=True)
            continue
        if layout is None or table not in TABLES:
            where = "outside any run_id=.../round=.../ folder" if table in TABLES else "in no table's folder"
            found[path] = Problem(path, f"no completion marker vouches for it: it is {where}"
                                  + (f"; {what}" if what else ""), unvouched=True)
            continue
        stem, key = path.stem, (run_id, rnd)
        if not what and (_owned(stem, legacy.get(key, ()))
                         or _by_design(table, rnd, stem)):
            continue
        if not what:
            if run_id not in live:
                live[run_id] = _live(store, run_id)
            if live[run_id]:
                in_progress.setdefault(run_id, []).append(path)
                continue
        found[path] = Problem(path, "no completion marker vouches for it" + (f", and {what}" if what else
                              " (a file put there by hand, or a chunk whose stage stopped before its marker)"),
                              run_id, rnd, unvouched=True)
    return Findings(list(found.values()), in_progress)


def _content_problem(path: Path, table: str | None) -> str:
    """Why the file cannot be one of ``table``'s chunks: unreadable, or other columns than the table's ("": none)."""
    import pyarrow.parquet as pq

    try:
        columns = pq.read_schema(source(path)).names
    except Exception as exc:  # pyarrow's ArrowInvalid, an OSError: the footer cannot be read
        return f"truncated or not Parquet ({type(exc).__name__})"
    if table not in TABLES:
        return ""
    from evosyn.storage.arrow import schema_of

    known = set(schema_of(TABLES[table]).names)
    # an older schema's file (migrated when the store is next opened for writing) holds fewer of them
    foreign = [c for c in columns if c not in known]
    if foreign or "run_id" not in columns:
        return (f"its columns are not the {table} table's ({', '.join((foreign or columns)[:3])}"
                f"{', ...' if len(foreign or columns) > 3 else ''}): every query of {table} fails on it")
    return ""


def _owned(stem: str, chunks) -> bool:
    """The file is one of these chunks' (``chunk-ab12-rollout`` is ``chunk-ab12``'s)."""
    return any(stem == c or stem.startswith(c + "-") for c in chunks if c)


def _by_design(table: str, rnd: int, stem: str) -> bool:
    rounds, names = _BY_DESIGN.get(table, (None, None))
    return names is not None and (rounds is None or rounds == rnd) and names.fullmatch(stem) is not None


def _live(store: "Store", run_id: str) -> bool:
    """Whether a process holds a lock of the run now (a run's ``run-<id>``, a test set's build, its dedup check):
    taken for an instant where its lock file exists, so a check creates none."""
    from evosyn.storage.locks import StoreLockTimeout, lock_path, store_lock

    for name in (f"run-{run_id}", run_id, f"dedup-{run_id}"):
        try:
            if not lock_path(store.location, name).exists():
                continue
            with store_lock(store.location, name, timeout=0):
                pass
        except StoreLockTimeout:
            return True
        except ValueError:  # too long a name for a lock: no process ever took it
            continue
    return False


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
    chunk's files), with the files they record (no marker would vouch for them until then) and the broken file
    itself, so that no reader meets it until then."""
    removed = []
    for p in problems:
        for target in (*(f for m in p.markers for f in (*_recorded_by(m), m)), p.path):
            if target.exists():
                target.unlink()
                removed.append(target)
    return removed


def _recorded_by(marker: Path) -> list[Path]:
    """The files ``marker`` records (``<root>/markers/run_id=R/round=N/x.done`` -> ``<root>/tables/T/run_id=R/...``)."""
    try:
        files = json.loads(marker.read_text()).get("files") or {}
    except (OSError, ValueError):
        return []
    tables = marker.parent.parent.parent.parent / "tables"
    return [tables / n.partition("/")[0] / marker.parent.parent.name / marker.parent.name / n.partition("/")[2]
            for n in files if n.partition("/")[0] in TABLES]


def quarantine(store: "Store", problems: list[Problem]) -> list[Path]:
    """Move each unvouched file of ``problems`` out of the tables, to ``<root>/quarantine/`` under its path in
    ``tables/`` (a number added where one is there already), so queries read the tables again; where each went."""
    moved = []
    base = store.tables_dir.as_posix().rstrip("/") + "/"
    target = store.tables_dir.parent / QUARANTINE
    for p in problems:
        if not p.unvouched or not p.path.exists():
            continue
        dest = target / p.path.as_posix().removeprefix(base)
        n = 0
        while dest.exists():
            n += 1
            dest = dest.with_name(f"{p.path.stem}.{n}{p.path.suffix}")
        if is_object(p.path):  # one object copied, then removed
            objectstore.put(dest, p.path.read_bytes())
            p.path.unlink()
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            p.path.replace(dest)
        moved.append(dest)
    return moved
