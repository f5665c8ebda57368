"""`evosyn store check [--repair]`: hold a store root to what its completion markers vouch for.

One line per problem (storage/chunks.py): a chunk file missing, truncated, of another row count or
other bytes than its marker records, any other chunk file that cannot be read, a half-made MLflow
database, an unreadable catalog. Exit 0 when there is none, 1 when there are (and ``--repair`` was not
asked, or could not fix them). ``--repair`` makes every broken chunk's stage redo it (its marker goes),
rebuilds the MLflow database and the catalog where they are broken, then resumes each run that holds a
broken chunk, which recomputes exactly those chunks, row-identically, and leaves a finished run finished.
A check itself writes nothing and never changes a run's status.
"""
from __future__ import annotations

from pathlib import Path

import click

from evosyn.flows.cli_app import main
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


@store.command("check")
@click.option("--repair", is_flag=True, help="Redo every broken chunk (resuming the runs that hold one), and rebuild "
                                             "a broken MLflow database or catalog.")
@click.pass_context
def check(ctx, repair: bool) -> None:
    """Verify every chunk file against its completion marker (row count and checksum), one line per problem."""
    from evosyn.storage.chunks import check as check_chunks

    st = open_store(ctx.obj.get("home"), create=False)  # a missing root is one line, exit 2
    problems = check_chunks(st)
    root_problems = _root_problems(st.root)
    for p in problems:
        click.echo(p.line())
    for _, line in root_problems:
        click.echo(line)
    n = len(problems) + len(root_problems)
    if not n:
        click.echo(f"ok: {st.where()}: every chunk matches its marker")
        return
    if not repair:
        click.echo(f"{n} problem(s); `evosyn store check --repair` redoes them", err=True)
        ctx.exit(1)
    _repair(ctx, st, problems, [what for what, _ in root_problems])


def _repair(ctx, st, problems, root_fixes: list[str]) -> None:
    from evosyn.storage.chunks import check as check_chunks
    from evosyn.storage.chunks import invalidate

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
    invalidate(problems)
    affected = sorted({p.run_id for p in problems if p.run_id})
    runs = st.runs()
    to_resume = [r for r in affected if r in runs]
    if any(r not in runs for r in affected):  # a test or probe set's chunk: every run that uses it rebuilds it
        to_resume = runs
    from evosyn.flows.cli_run import run as run_command

    for run_id in to_resume:
        click.echo(f"resuming {run_id} to redo its broken chunks")
        ctx.invoke(run_command, resume=run_id, quiet=True)
    left = check_chunks(st)
    if left:
        for p in left:
            click.echo(f"still broken: {p.line()}")
        ctx.exit(1)
    pending = sorted(set(affected) - set(to_resume))
    click.echo(f"repaired: {len(problems) + len(root_fixes)} problem(s); every chunk matches its marker"
               + (f"; the broken chunks of {', '.join(pending)} are gone and the next run that builds them "
                  "recomputes them" if pending else ""))
