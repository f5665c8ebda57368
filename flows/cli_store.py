"""`evosyn store check [--repair]`: hold a store root to what its completion markers vouch for.

One line per problem (storage/chunks.py): a chunk file missing, truncated, of another row count or
other bytes than its marker records, any other file under tables/ that nothing vouches for or that
cannot be read, a half-made MLflow database, an unreadable catalog. Exit 0 when there is none, 1 when
there are (and ``--repair`` was not asked, or could not fix them). ``--repair`` moves the unvouched files
to ``quarantine/`` (queries read the tables again), rebuilds a broken chunk of a fixed test set at once
and shows it row-identical to what its markers recorded, or fails in one line naming what did not come
back (tasks/testset_repair.py); makes every other broken chunk's stage redo it (its marker goes) and
resumes each run that holds one, which recomputes exactly those chunks, row-identically, and leaves a
finished run finished; and rebuilds the MLflow database and the catalog where they are broken. A check
itself writes nothing and never changes a run's status; the files of a run in progress (it holds its
lock) are said, not flagged.
"""
from __future__ import annotations

from pathlib import Path

import click

from evosyn.flows.cli_app import UserError, main
from evosyn.flows.inputs import open_store


@main.group()
def store() -> None:
    """The store root: check what it holds, and repair it."""


def _root_problems(root: Path) -> list[tuple[str, str]]:
    """(what, one line) of the root's own files: the MLflow database and the catalog."""
    out = []
    db = root / "mlflow.db"
    if db.is_file():
        from evosyn.storage.mlflow_db import half_made

        why = half_made(db)
        if why:
            out.append(("mlflow", f"{db}: half-made MLflow database ({why})"))
    catalog = root / "catalog.duckdb"
    if catalog.exists():
        from evosyn.storage.catalog import catalog_readable

        if not catalog_readable(catalog):
            out.append(("catalog", f"{catalog}: unreadable DuckDB catalog"))
    return out


class RepairFailed(UserError):
    """A repair that cannot restore what was there: one line naming what is lost, exit 1."""

    exit_code = 1


@store.command("check")
@click.option("--repair", is_flag=True, help="Redo every broken chunk (resuming the runs that hold one, rebuilding a "
                                             "test set's row-identically), move files no marker vouches for to "
                                             "quarantine/, and rebuild a broken MLflow database or catalog.")
@click.pass_context
def check(ctx, repair: bool) -> None:
    """Verify every chunk file against its completion marker (row count and checksum), and that every other file
    under tables/ is vouched for; one line per problem."""
    from evosyn.storage.chunks import check_root

    st = open_store(ctx.obj.get("home"), create=False)  # a missing root is one line, exit 2
    found = check_root(st)
    problems = found.problems
    root_problems = _root_problems(st.root)
    for p in problems:
        click.echo(p.line())
    for _, line in root_problems:
        click.echo(line)
    for run_id, files in sorted(found.in_progress.items()):
        click.echo(f"run {run_id} is running (it holds its lock): {len(files)} file(s) its stages are writing, "
                   "not vouched for yet, were not checked")
    n = len(problems) + len(root_problems)
    if not n:
        click.echo(f"ok: {st.where()}: every chunk matches its marker")
        return
    if not repair:
        click.echo(f"{n} problem(s); `evosyn store check --repair` redoes them", err=True)
        ctx.exit(1)
    _repair(ctx, st, problems, [what for what, _ in root_problems])


def _quarantine(st, problems) -> None:
    from evosyn.storage.chunks import quarantine

    for p in problems:
        (dest,) = quarantine(st, [p]) or (None,)
        if dest is not None:
            click.echo(f"moved {p.path} to {dest} (no marker vouches for it)")


def _rebuild_sets(st, problems) -> list[str]:
    """Each finished test or probe set with a broken chunk, rebuilt here and compared with what its markers
    recorded: row-identical, or what did not come back (returned: one sentence per set)."""
    from evosyn.envs.packs import PackError, UnknownDomain, use_data
    from evosyn.flows.compile import stored_domain
    from evosyn.storage.chunks import invalidate
    from evosyn.tasks.testset_repair import SetRepairError, build_of, rebuild

    by_set: dict[str, list] = {}
    for p in problems:
        by_set.setdefault(p.run_id, []).append(p)
    failed = []
    for run_id, broken in sorted(by_set.items()):
        names = ", ".join(p.path.name for p in broken)
        try:
            build = build_of(st, run_id)
            if build is None:  # not finished: the next run that uses it resumes its build, which redoes them
                invalidate(broken)
                click.echo(f"test set {run_id} is not built to the end: the run that next uses it rebuilds {names}")
                continue
            if build.data_source:
                use_data({build.domain: build.data_source}, build.domain)
            lost = rebuild(st, stored_domain(build.domain), build, broken)
        except SetRepairError as exc:
            failed.append(f"{exc}; its broken file(s) {names} are left as they are")
            continue
        except (UnknownDomain, PackError) as exc:
            failed.append(f"test set {run_id}: cannot rebuild {names} ({exc.args[0]}); left as they are")
            continue
        if lost:
            failed.append(f"test set {run_id}: rebuilt, but not as it was: {'; '.join(lost[:3])}"
                          + (f" (+{len(lost) - 3} more)" if len(lost) > 3 else "")
                          + f": it is not the set earlier runs were tested on (remove tables/*/run_id={run_id} "
                          f"and markers/run_id={run_id} to build it anew, then evaluate again)")
            continue
        click.echo(f"rebuilt test set {run_id}: row-identical ({names} as their markers recorded)")
    return failed


def _repair(ctx, st, problems, root_fixes: list[str]) -> None:
    from evosyn.storage.chunks import check as check_chunks
    from evosyn.storage.chunks import invalidate
    from evosyn.tasks.testset_repair import is_set

    if "mlflow" in root_fixes:
        from evosyn.storage.locks import store_lock
        from evosyn.storage.mlflow_db import ensure_tracking_db
        from evosyn.storage.tracking import default_tracking_uri

        with store_lock(st.root, "mlflow"):
            ensure_tracking_db(default_tracking_uri(st.root))
        click.echo(f"rebuilt {st.root / 'mlflow.db'} (the half-made one is kept beside it)")
    if "catalog" in root_fixes:
        from evosyn.storage.catalog import write_catalog_file

        click.echo(f"rebuilt {write_catalog_file(open_store(str(st.root), create=True))}")
    _quarantine(st, [p for p in problems if p.unvouched])
    chunks = [p for p in problems if not p.unvouched]
    failed = _rebuild_sets(st, [p for p in chunks if is_set(p.run_id)])
    chunks = [p for p in chunks if not is_set(p.run_id)]
    invalidate(chunks)
    affected = sorted({p.run_id for p in chunks if p.run_id})
    runs = st.runs()
    to_resume = [r for r in affected if r in runs]
    from evosyn.flows.cli_run import run as run_command

    for run_id in to_resume:
        click.echo(f"resuming {run_id} to redo its broken chunks")
        ctx.invoke(run_command, resume=run_id, quiet=True)
    if failed:
        raise RepairFailed(" | ".join(failed))
    left = check_chunks(st)
    if left:
        for p in left:
            click.echo(f"still broken: {p.line()}")
        ctx.exit(1)
    pending = sorted(set(affected) - set(to_resume))  # a synthesis pass's: no run to resume
    click.echo(f"repaired: {len(problems) + len(root_fixes)} problem(s); every chunk matches its marker"
               + (f"; the broken chunks of {', '.join(pending)} are gone and the next pass that builds them "
                  "recomputes them" if pending else ""))
