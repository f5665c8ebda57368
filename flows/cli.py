"""The `evosyn` command line: the entry point, with the store commands (config, query).

Importing this module attaches every command module's commands to ``main``
(flows/cli_app.py), so ``--help`` lists them all; ``evosyn bench`` comes from
the ``benchmarks`` layer through the ``evosyn.commands`` entry point.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from evosyn.flows import (cli_dedup, cli_envs, cli_learn, cli_new_domain, cli_run, cli_services, cli_store,  # noqa: F401
                   cli_sweep, cli_synth, cli_testsets, cli_view)
from evosyn.flows.cli_app import PATH, UserError, debugging, main
from evosyn.flows.inputs import store_from


# ---------------------------------------------------------------- config
@main.group()
def config() -> None:
    """Run configurations."""


@config.command("validate")
@click.argument("file", type=PATH)
def config_validate(file: str) -> None:
    """Check a YAML run config and print the resolved settings."""
    from evosyn.config import ConfigError, load_config

    try:
        cfg = load_config(file)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    click.echo(f"ok: {file}")
    for key, value in cfg.model_dump(mode="json").items():
        click.echo(f"  {key}: {value}")


# ---------------------------------------------------------------- query
@main.command()
@click.argument("sql")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "parquet"]),
              default="table", show_default=True)
@click.option("--output", type=PATH, help="Write the result to this file.")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
              help="Rows shown in table format.")
@click.option("--unsafe-full-access", is_flag=True,
              help="Run the SQL with your own file and network access (COPY … TO, read_csv of any file, ATTACH, "
                   "INSTALL). Off: it only reads the store's tables.")
@click.pass_context
def query(ctx: click.Context, sql: str, fmt: str, output: str | None, limit: int, unsafe_full_access: bool) -> None:
    """Run SQL over every store table (runs, tasks, verdicts, …) with DuckDB.

    The SQL reads the store's tables and nothing else: no file outside them read, none written, no database
    attached, no extension installed. --unsafe-full-access lifts that; --output writes the result either way.
    """
    import duckdb

    from evosyn.flows.inputs import check_output, writing
    from evosyn.storage.catalog import query as run_query
    from evosyn.storage.catalog import query_rows

    if fmt == "parquet" and not output:
        raise UserError("--format parquet needs --output PATH")
    target = check_output(output, "--output") if output else None
    store = store_from(ctx, create=False)
    as_rows = fmt in ("table", "json")  # as Python rows: no pyarrow to import; csv and parquet by pyarrow's writers
    sandboxed = not unsafe_full_access
    try:
        result = (query_rows(sql, store, limit if fmt == "table" else None, sandboxed=sandboxed) if as_rows
                  else run_query(sql, store, sandboxed=sandboxed))
    except duckdb.Error as exc:
        raise UserError(f"SQL: {_first_line(exc)}{_sandbox_hint(exc) if sandboxed else ''}") from None
    except Exception as exc:
        _arrow_error(exc)
        raise
    from evosyn.flows.render import write_result, write_rows

    write = write_rows if as_rows else write_result
    try:
        if target is None:
            write(result, fmt, None, limit)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        with writing(target, "--output"):
            write(result, fmt, target, limit)
    except Exception as exc:
        _arrow_error(exc)
        raise


def _sandbox_hint(exc: Exception) -> str:
    """The way out of the sandbox, for an error the sandbox caused (a refused statement, file or setting)."""
    import duckdb  # imported by `query` already

    if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in str(exc):
        return " (--output FILE saves a result; --unsafe-full-access runs any SQL with your own file access)"
    return ""


def _arrow_error(exc: Exception) -> None:
    """pyarrow's refusal of a result column (converting or writing it) as one line naming the fix."""
    if type(exc).__module__.startswith("pyarrow"):
        raise UserError(f"SQL: a result column cannot be converted ({_first_line(exc)}); "
                        "cast it, e.g. col::VARCHAR") from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run() -> None:  # console-script entry point
    try:
        main(standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # the last resort: an error no command turned into its own line
        if debugging():
            raise
        click.echo(f"error: {unexpected(exc)} (evosyn --debug shows the traceback)", err=True)
        sys.exit(1)


def unexpected(exc: BaseException) -> str:
    """One line for an exception nothing named: its type, its first line, and where it was raised."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = _first_line(exc) if str(exc).strip() else ""
    return f"{type(exc).__name__}{where}" + (f": {text[:300]}" if text else "")


if __name__ == "__main__":
    run()
