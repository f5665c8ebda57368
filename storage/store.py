"""The Parquet store: one table per record type, partitioned run_id=…/round=…/.

Writes are atomic (temp file in the partition, then ``os.replace``) and
idempotent per chunk id: writing chunk ``c`` again replaces ``c.parquet``, it
never adds a second copy. Reads return polars DataFrames.

Each table also holds an empty Parquet file with its schema, named by the
schema's fingerprint, at ``run_id=/round=0/<fingerprint>.parquet`` (an empty run
id, which no run can have): a partition-shaped path at the data files' depth, so
one hive-partitioned glob of fixed depth (``*/*/*.parquet``) always matches at
least that file (DuckDB refuses an empty glob) and every file it matches has the
same partition keys. DuckDB walks the folders of such a glob once (a recursive
``**`` glob, twice), and a filter on ``run_id`` / ``round`` opens only the
matching partitions' files. Listings of runs skip it (``RUN_DIRS``). A store written
with an older schema is migrated when it is opened for writing: each file of
another schema is rewritten from its records (so its rows are exactly what the
current code writes), then the schema file is replaced (a store of the previous
layout, with it under ``_schema/``, only moves it). Until then, readers fall back to reading by column name
(storage/catalog.py).

The root may be ``s3://bucket/prefix`` (storage/objectstore.py): the tables and markers are then objects
under the prefix, each chunk file one PUT (no temp file, no rename), the locks are lease objects
(storage/leases.py), and ``root`` is this machine's folder for what the store does not share.
"""
from __future__ import annotations

import errno
import json
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from evosyn.storage import objectstore
from evosyn.storage.objectstore import is_object, source
from evosyn.storage.atomic import atomic_path, write_text
from evosyn.storage.records import TABLES, Record
from evosyn.storage.redact import redact_table
from evosyn.storage.schemas import schema_fingerprint

if TYPE_CHECKING:
    import polars as pl

SCHEMA_FILE = "_schema.parquet"  # an older layout's schema file, in the table's folder (removed by `_migrate`)
SCHEMA_DIR = Path("run_id=") / "round=0"  # see the module doc
OLD_SCHEMA_DIR = Path("_schema") / "run_id=" / "round=0"  # an older layout's (removed by `_migrate`)
RUN_DIRS = "run_id=?*"  # a glob of a table's run partitions: not the schema file's empty run id
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


def default_root() -> Path:
    """This machine's folder of the default store (``EVOSYN_HOME``; of an ``s3://`` store, its local folder)."""
    given = os.environ.get("EVOSYN_HOME", ".evosyn")
    return objectstore.local_home(given) if objectstore.is_remote(given) else Path(given).expanduser()


def _check_id(kind: str, value: str) -> str:
    if not _SAFE_ID.match(value):
        raise ValueError(f"{kind} {value!r} is not a safe id: use letters, digits, '_', '.', '-' "
                         "(at most 128 characters, not starting with a symbol)")
    return value


class StoreFault(RuntimeError):
    """A chunk file of the store cannot be read (truncated, corrupt, vanished): one line naming it and the fix."""


def fault(path: Path, exc: BaseException) -> StoreFault:
    why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return StoreFault(f"{path}: unreadable chunk file ({why}); run `evosyn store check --repair` to rebuild it")


_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}
_DISK_TEXTS = ("database or disk is full", "disk i/o error", "no space left", "file too large",
               "read-only file system")


def as_store_fault(exc: BaseException) -> StoreFault | None:
    """The one-line fault of an error that is the store's (an unreadable chunk, a tracking database that cannot
    be opened, a full or failing disk under any of them); None for any other error."""
    from evosyn.storage.mlflow_db import TrackingStoreError

    if isinstance(exc, (StoreFault, TrackingStoreError)):
        return exc if isinstance(exc, StoreFault) else StoreFault(str(exc))
    text = " ".join(str(exc).split())
    if (isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS) or any(t in text.lower() for t in _DISK_TEXTS):
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
        return StoreFault(f"{where}the disk refused a write ({type(exc).__name__}: {text[:200]}); free space (or "
                          "fix the disk) and rerun: a run resumes where it stopped")
    return None


def _read(path: Path, columns: list[str] | None = None):
    """One chunk file as a table: ``ParquetFile.read`` (half the CPU of ``pq.read_table``, which builds a dataset
    and its partitioning for every file; the same rows, tests/storage/test_store.py)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(source(path)) as f:
            return f.read(columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise fault(path, exc) from None


def _check_table(name: str) -> str:
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; known tables: {', '.join(sorted(TABLES))}")
    return name


def table_for(name: str) -> type[Record]:
    return TABLES[_check_table(name)]


def _atomic_write(table, path: Path) -> None:
    import pyarrow.parquet as pq

    if is_object(path):  # the whole file in one PUT: a reader sees the old object or the new one
        import pyarrow as pa

        buf = pa.BufferOutputStream()
        pq.write_table(table, buf, compression="zstd")
        objectstore.put(path, buf.getvalue().to_pybytes())
        return
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def _write_text(path, text: str) -> None:
    if is_object(path):
        objectstore.put(path, text.encode())
    else:
        write_text(path, text)


class Store:
    """A store root holding every EvoSyn table (default ``./.evosyn``, env ``EVOSYN_HOME``)."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, create: bool = True):
        given = str(root) if root is not None else os.environ.get("EVOSYN_HOME", ".evosyn")
        self.remote = objectstore.is_remote(given)
        if self.remote:  # tables and markers under the prefix; root: this machine's folder (storage/objectstore.py)
            self.location = objectstore.normalize(given)
            base = objectstore.remote_path(self.location)
            self.root = objectstore.local_home(self.location)
        else:
            self.root = base = Path(root).expanduser() if root is not None else default_root()
            self.location = str(self.root)
        self.tables_dir = base / "tables"
        self.markers_dir = base / "markers"
        if create:
            self._ensure_schema_files()
            if not self.remote:  # a catalog file for other DuckDB clients: over S3 they would need httpfs
                # imported here: the catalog module builds on Store
                from evosyn.storage.catalog import ensure_catalog_file

                ensure_catalog_file(self)

    def where(self) -> str:
        """The store as a user names it: its folder (absolute), or its ``s3://`` location."""
        return self.location if self.remote else str(self.root.absolute())

    # ------------------------------------------------------------ layout
    def table_dir(self, table: str) -> Path:
        return self.tables_dir / _check_table(table)

    def partition_dir(self, table: str, run_id: str, round: int) -> Path:
        return self.table_dir(table) / f"run_id={_check_id('run_id', run_id)}" / f"round={int(round)}"

    def schema_path(self, table: str) -> Path:
        """The table's schema file for the current schema (present once every file of the table has it)."""
        return self.table_dir(table) / SCHEMA_DIR / f"{schema_fingerprint(TABLES[table])}.parquet"

    def has_current_schema(self, table: str) -> bool:
        return self.schema_path(table).is_file()

    def _stale_schema_files(self) -> list[str]:
        return [name for name in TABLES if not self.has_current_schema(name)]

    def _ensure_schema_files(self) -> None:
        """A schema file per table, every data file in the current schema (a migration, once per schema change)."""
        if not self._stale_schema_files():
            return
        from evosyn.storage.locks import store_lock

        with store_lock(self.location, "schema"):  # concurrent first runs: one writes, the others find them
            for name in self._stale_schema_files():
                self._migrate(name)

    def _migrate(self, table: str) -> None:
        """Rewrite the files of ``table`` that have another schema, then write its current schema file.

        Each file goes through its records (``from_rows`` fills fields a file predates with their
        defaults; ``to_table`` adds the derived columns), so the rewritten rows are the ones the current
        code writes, and digests do not change. Interrupted, it redoes only the files still to rewrite.
        """
        import pyarrow.parquet as pq

        from evosyn.storage.arrow import from_rows, schema_of, to_table

        model, schema = table_for(table), schema_of(table_for(table))
        for path in self.files(table):
            try:
                if pq.read_schema(source(path)).equals(schema, check_metadata=False):
                    continue
                records = from_rows(pq.read_table(source(path)).to_pylist(), model)
            except Exception as exc:
                raise RuntimeError(f"{path}: cannot migrate it to the current {table} schema "
                                   f"({type(exc).__name__}: {str(exc)[:200]}); move the file away or "
                                   "delete its run") from None
            _atomic_write(to_table(records, model), path)
        base = self.table_dir(table)
        target = self.schema_path(table)
        olds = [base / SCHEMA_FILE, *(base / OLD_SCHEMA_DIR).glob("*.parquet"),
                *(p for p in (base / SCHEMA_DIR).glob("*.parquet") if p != target)]
        for old in olds:  # first: the glob never matches two schema files
            old.unlink(missing_ok=True)
        for folder in () if self.remote else (OLD_SCHEMA_DIR, OLD_SCHEMA_DIR.parent, OLD_SCHEMA_DIR.parent.parent):
            try:
                (base / folder).rmdir()
            except OSError:  # absent, or holds something that is not ours
                pass
        _atomic_write(schema.empty_table(), target)

    # ------------------------------------------------------------ writes
    def write(self, records: Sequence[Record], chunk_id: str) -> list[Path]:
        """Write records as chunk ``chunk_id`` of their table, replacing any earlier copy."""
        _check_id("chunk_id", chunk_id)
        if not records:
            return []
        from evosyn.storage.arrow import to_table

        model = type(records[0])
        if model.table not in TABLES:
            raise TypeError(f"{model.__name__} is not a store record")
        groups: dict[tuple[str, int], list[Record]] = defaultdict(list)
        for rec in records:
            groups[(rec.run_id, rec.round)].append(rec)
        paths = []
        for (run_id, rnd), recs in sorted(groups.items()):
            part = self.partition_dir(model.table, run_id, rnd)
            if not self.remote:  # an object store has no folders
                part.mkdir(parents=True, exist_ok=True)
            path = part / f"{chunk_id}.parquet"
            _atomic_write(redact_table(to_table(recs, model)), path)  # no key in any row (storage/redact.py)
            paths.append(path)
        return paths

    def remove_chunk(self, table: str, run_id: str, round: int, chunk_id: str) -> None:
        """Remove chunk ``chunk_id`` of one partition, if it is there (a rewrite of a chunk to no records)."""
        path = self.partition_dir(table, run_id, round) / f"{_check_id('chunk_id', chunk_id)}.parquet"
        path.unlink(missing_ok=True)

    def has_chunk(self, table: str, run_id: str, round: int, chunk_id: str) -> bool:
        return (self.partition_dir(table, run_id, round) / f"{chunk_id}.parquet").exists()

    def delete_run(self, run_id: str) -> None:
        """Remove every partition and completion marker of one run (used by tests and `--force` reruns)."""
        import shutil

        parts = [self.table_dir(name) / f"run_id={_check_id('run_id', run_id)}" for name in TABLES]
        for part in [self.markers_dir / f"run_id={run_id}", *parts]:  # markers first: never a marker without data
            if self.remote:
                objectstore.remove_tree(part)
            elif part.exists():
                shutil.rmtree(part)

    # ------------------------------------------------------------ completion markers
    # A stage that writes several tables (or may legitimately write nothing) is
    # complete only once its marker exists: the marker is written, atomically,
    # after the stage's last table write, so a crash anywhere before it leaves
    # the stage incomplete and a rerun recomputes it (rewriting the same chunk
    # files, so nothing is duplicated). Markers live outside tables/, where no
    # Parquet glob or DuckDB view sees them.
    def marker_path(self, stage: str, run_id: str, round: int, chunk: str = "") -> Path:
        name = _check_id("stage", stage) + (f".{_check_id('chunk', chunk)}" if chunk else "")
        return self.markers_dir / f"run_id={_check_id('run_id', run_id)}" / f"round={int(round)}" / f"{name}.done"

    def mark_complete(self, stage: str, run_id: str, round: int, chunk: str = "", since_ns: int | None = None,
                      **info: object) -> Path:
        """Record that ``stage`` (``chunk``) of ``run_id`` round ``round`` wrote all of its output, with what it
        wrote since ``since_ns`` (when it began): each chunk file's row count and checksum
        (``storage/chunks.py``), so a resume can verify it."""
        from evosyn.storage.chunks import describe

        path = self.marker_path(stage, run_id, round, chunk)
        # a chunk's marker records its files, none too: it is told apart from a marker of before such records
        files = describe(self, run_id, round, chunk, since_ns) if chunk else {}
        _write_text(path, json.dumps({"stage": stage, "run_id": run_id, "round": int(round), "chunk": chunk,
                                     **info, **({"files": files} if chunk else {})}, default=str) + "\n")
        return path

    def is_complete(self, stage: str, run_id: str, round: int, chunk: str = "") -> bool:
        return self.marker_path(stage, run_id, round, chunk).is_file()

    # ------------------------------------------------------------ reads
    def files(self, table: str, run_id: str | None = None, round: int | None = None) -> list[Path]:
        base = self.table_dir(table)
        run_glob = f"run_id={_check_id('run_id', run_id)}" if run_id is not None else RUN_DIRS
        round_glob = f"round={int(round)}" if round is not None else "round=*"
        return sorted(base.glob(f"{run_glob}/{round_glob}/*.parquet"))

    def read(self, table: str, run_id: str | None = None, round: int | None = None) -> pl.DataFrame:
        import polars as pl

        from evosyn.storage.arrow import schema_of

        model = table_for(table)
        files = self.files(table, run_id, round)
        if not files:
            return pl.from_arrow(schema_of(model).empty_table())
        if self.remote:  # each object in one GET (polars would read them through its own S3 client)
            import pyarrow as pa

            return pl.from_arrow(pa.concat_tables([_read(f) for f in files]))
        try:
            return pl.read_parquet(files, hive_partitioning=False)
        except (pl.exceptions.PolarsError, OSError):  # which file: each one read alone says
            for f in files:
                _read(f)
            raise

    def read_records(self, table: str, run_id: str | None = None, round: int | None = None,
                     where: Callable[[dict], bool] | None = None) -> list[Record]:
        """The records of ``table`` (of a run, of a round); ``where``: a test on a row's stored values (JSON
        columns still text), so that only the rows it keeps are parsed and validated."""
        from evosyn.storage.arrow import from_rows

        model = table_for(table)
        files = self.files(table, run_id, round)
        rows: list[dict] = []
        for f in files:
            rows.extend(_read(f).to_pylist())
        return from_rows(rows if where is None else filter(where, rows), model)

    def read_fields(self, table: str, fields: Sequence[str], run_id: str | None = None,
                    round: int | None = None) -> list[dict]:
        """Only ``fields`` of each row, as plain values (JSON columns parsed), without building the records:
        for callers that scan a whole run for a few fields (a test set's fills read every attempt's verdicts)."""
        from evosyn.storage.arrow import json_columns, loads_json

        model = table_for(table)
        unknown = [f for f in fields if f not in model.model_fields]
        if unknown:
            raise KeyError(f"{table} has no field {', '.join(unknown)}")
        jcols = json_columns(model) & set(fields)
        rows: list[dict] = []
        for f in self.files(table, run_id, round):
            rows.extend(_read(f, list(fields)).to_pylist())
        if jcols:
            for row in rows:
                for k in jcols:
                    if row[k] is not None:
                        row[k] = loads_json(row[k])
        return rows

    def read_chunk(self, table: str, run_id: str, round: int, chunk_id: str) -> list[Record]:
        """The records of one chunk, in the order they were written (empty when the chunk is absent)."""
        path = self.partition_dir(table, run_id, round) / f"{_check_id('chunk_id', chunk_id)}.parquet"
        if not path.is_file():
            return []
        from evosyn.storage.arrow import from_rows

        return from_rows(_read(path).to_pylist(), table_for(table))

    def count(self, table: str, run_id: str | None = None, round: int | None = None) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        total = 0
        for f in self.files(table, run_id, round):
            try:
                total += pq.read_metadata(source(f)).num_rows
            except (pa.ArrowException, OSError) as exc:
                raise fault(f, exc) from None
        return total

    def runs(self, any_table: bool = False) -> list[str]:
        """Run ids of the ``runs`` table, or (``any_table``) with a partition in any table (synthesis passes and
        test sets have no ``runs`` row)."""
        base, pattern = (self.tables_dir, f"*/{RUN_DIRS}") if any_table else (self.table_dir("runs"), RUN_DIRS)
        if self.remote:  # a run is there while it has an object (a server may list emptied prefixes as folders)
            return sorted({p.parent.parent.name.split("=", 1)[1] for p in base.glob(f"{pattern}/round=*/*.parquet")})
        return sorted({p.name.split("=", 1)[1] for p in base.glob(pattern) if p.is_dir()})
