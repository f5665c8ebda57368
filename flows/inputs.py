"""What a command reads and writes, checked before any work starts.

Each check raises one `UserError` line naming the path and the fix (exit code 2)
and creates nothing: a store root that cannot be created, an output that
cannot be written, a run that is not in the store. Writes that still fail
later (a disk that fills up) go through `writing`, which turns the OSError
into the same kind of line.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from evosyn.flows.cli_app import UserError

if TYPE_CHECKING:
    from evosyn.config import RunConfig

POINT_ELSEWHERE = "point at another store root with `evosyn --home DIR …` or EVOSYN_HOME=DIR"


def use_env_data(cfg: RunConfig) -> None:
    """The data folders of ``cfg.env_data`` in use in this process from now on (every other domain on its
    default), the run's own domain loaded from its folder now: one ``ConfigError`` line otherwise."""
    from evosyn.envs.packs import PackError, UnknownDomain, use_data
    from evosyn.storage.userfiles import ConfigError

    try:
        use_data(cfg.env_data, cfg.domain)
    except UnknownDomain as exc:
        raise ConfigError(f"invalid config: field 'env_data': {exc}") from None
    except PackError as exc:
        raise ConfigError(f"invalid config: field {exc}") from None


def check_seed(seed: int | None, option: str = "--seed") -> int | None:
    """A seed the run config's ``seed`` field takes (0 to 2**32 - 1: numpy's and scikit-learn's seeds, and every
    seed derived from it stays an int64), before any work; one line naming the option otherwise."""
    from evosyn.config import SEED_MAX

    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise UserError(f"{option} {seed}: a seed is a whole number from 0 to {SEED_MAX} (2**32 - 1, what numpy and "
                        "scikit-learn take); pass one in that range")
    return seed


def store_location(home: str | os.PathLike[str] | None) -> str:
    """The store a command uses: --home, else EVOSYN_HOME, else ./.evosyn (a folder, or ``s3://bucket/prefix``)."""
    return str(home) if home else os.environ.get("EVOSYN_HOME") or ".evosyn"


def store_root(home: str | os.PathLike[str] | None) -> Path:
    """This machine's folder of the store a command uses: the store itself, or an ``s3://`` store's local folder."""
    from evosyn.storage.objectstore import is_remote, local_home

    location = store_location(home)
    return local_home(location) if is_remote(location) else Path(location).expanduser()


def _first_existing(path: Path) -> Path:
    path = path.absolute()
    while not (path.exists() or path.is_symlink()) and path != path.parent:
        path = path.parent
    return path


def cannot_create(path: Path) -> str | None:
    """Why a folder cannot be created (or written in) at ``path``; None when it can. Leaves nothing behind."""
    if path.is_symlink() and not path.exists():
        return f"{path} is a broken symlink"
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a folder"
    base = _first_existing(path)
    if base.is_symlink() and not base.exists():
        return f"{base} is a broken symlink"
    if not base.is_dir():
        return f"{base} is a file, not a folder"
    # os.access says yes to root everywhere, and /proc refuses new files whatever the mode bits say:
    # only creating a file tells (it is removed at once)
    try:
        fd, probe = tempfile.mkstemp(dir=base, prefix=".evosyn-probe-")
    except OSError as exc:
        return f"cannot create files in {base} ({exc.strerror})"
    os.close(fd)
    os.unlink(probe)
    return None


def check_store_root(root: Path) -> Path:
    """Refuse a store root that cannot be created or written, before any work."""
    why = cannot_create(root)
    if why:
        raise UserError(f"store root {root}: {why}; pass a writable folder with --home or EVOSYN_HOME")
    return root


def check_output(path: str | os.PathLike[str], option: str, kind: str = "file") -> Path:
    """Refuse an output (a file, or a folder when ``kind == "dir"``) that cannot be written; creates nothing."""
    out = Path(path).expanduser()
    if kind == "file":
        if out.is_dir():
            raise UserError(f"{option} {out}: a folder, not a file (pass a file path)")
        why = cannot_create(out.parent)
    else:
        why = cannot_create(out)
    if why:
        raise UserError(f"{option} {out}: cannot be written: {why}; pick a writable location")
    return out


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """A write that fails after the checks (full disk, a file changed meanwhile) is one line too."""
    try:
        yield
    except OSError as exc:
        where = exc.filename or path
        raise UserError(f"{option} {path}: writing {where} failed ({exc.strerror or exc}); "
                        "pick a writable location") from None


def unknown_run(rid: str, option: str, root: Path, known: list[str]) -> str:
    """The line for a run that is not in the store: where it looked, what is near, how to look elsewhere."""
    import difflib

    where = root.absolute()  # "./.evosyn" says nothing when the command ran from another folder
    if not where.is_dir():
        found = f"there is no store at {where}"
    elif not known:
        found = f"the store at {where} has no runs"
    else:
        count = f"{len(known)} run{'s' if len(known) != 1 else ''}"
        near = difflib.get_close_matches(rid, known, n=3, cutoff=0.5)
        if near:
            found = f"the store at {where} has {count}; nearest: {', '.join(near)}"
        else:
            found = (f"the store at {where} has {count}: {', '.join(known[:5])}"
                     + (", …" if len(known) > 5 else ""))
    return f"{option} {rid}: no such run ({found}); check the id, or {POINT_ELSEWHERE}"


def open_store(home: str | os.PathLike[str] | None, *, create: bool = True, runs: Iterable[str] = (),
               option: str = "run", any_table: bool = False):
    """The store a command reads (``create=False``) or writes; ``runs`` (named by ``option``) must be in it."""
    from evosyn.storage.objectstore import is_remote
    from evosyn.storage.store import Store

    if is_remote(store_location(home)):
        return _open_remote(store_location(home), create, list(dict.fromkeys(runs)), option, any_table)
    root = store_root(home)
    if root.exists() and not root.is_dir():
        raise UserError(f"store root {root}: a file, not a folder; pass a folder with --home or EVOSYN_HOME")
    wanted = list(dict.fromkeys(runs))
    if not create and not wanted and not root.exists():  # a reader of a root nobody wrote: say so, not "0 rows"
        # (a named run's line says it too: unknown_run)
        raise UserError(f"store root {root.absolute()}: no store there (nothing was run with this root); "
                        f"{POINT_ELSEWHERE}")
    if wanted:
        known = Store(root, create=False).runs(any_table)
        for rid in wanted:
            if rid not in known:
                raise UserError(unknown_run(rid, option, root, known))
    if not create:
        return Store(root, create=False)
    check_store_root(root)
    try:
        return Store(root, create=True)
    except OSError as exc:
        raise UserError(f"store root {root}: cannot create it ({exc.strerror}); {POINT_ELSEWHERE}") from None


def _open_remote(location: str, create: bool, wanted: list[str], option: str, any_table: bool):
    """``open_store`` of an ``s3://`` store: a bucket that cannot be reached, or a prefix that holds no store, is
    one line."""
    from evosyn.storage.objectstore import S3Error, S3Unreachable, bucket_exists, has_objects
    from evosyn.storage.store import Store

    try:
        store = Store(location, create=False)
        bucket = location[len("s3://"):].split("/", 1)[0]
        if not bucket_exists(store.tables_dir, bucket):
            raise UserError(f"store root {location}: bucket {bucket} does not exist (create it, or check "
                            "AWS_ENDPOINT_URL / the credentials)")
        if not create and not wanted and not has_objects(store.tables_dir):
            raise UserError(f"store root {location}: no store there (nothing was run with this root); "
                            f"{POINT_ELSEWHERE}")
        known = store.runs(any_table) if wanted else []
        for rid in wanted:
            if rid not in known:
                raise UserError(f"{option} {rid}: no such run (the store at {location} has {len(known)} runs"
                                f"{': ' + ', '.join(known[:5]) if known else ''}); check the id, or {POINT_ELSEWHERE}")
        return Store(location, create=True) if create else store
    except S3Unreachable as exc:
        raise UserError(f"store root {location}: {exc}") from None
    except (S3Error, PermissionError) as exc:
        raise UserError(f"store root {location}: cannot be used ({type(exc).__name__}: {exc})") from None


def bench_output(name: str, output: str | None) -> Path:
    """Where a benchmark's JSON goes (``--output``, else bench-results/<name>.json), checked up front."""
    return check_output(output or Path("bench-results") / f"{name}.json", "--output")


def store_from(ctx, create: bool = True, runs: tuple[str, ...] = (), option: str = "run", any_table: bool = False):
    """The store of a command's --home / EVOSYN_HOME (``ctx.obj["home"]``): read (``create=False``) or created."""
    return open_store(ctx.obj.get("home"), create=create, runs=runs, option=option, any_table=any_table)
