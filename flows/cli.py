"""The `evosyn` command line."""
from __future__ import annotations

import sys

import click

import storage.offline  # noqa: F401

# paths are plain strings to click: its own existence checks print three lines; flows/inputs.py
# checks each path before any work and says what is wrong in one
PATH = click.Path(readable=False)


class UserError(click.ClickException):
    """A one-line error for the user: printed as ``error: …``, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # one line, no usage dump
        click.echo(f"error: {self.format_message()}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=PATH, envvar="EVOSYN_HOME", help="Store root (default ./.evosyn, env EVOSYN_HOME).")
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """EvoSyn: closed-loop synthesis of training data for tool-using agents."""
    from storage.config import ConfigError, load_dotenv_secrets

    try:
        load_dotenv_secrets()
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    ctx.obj = {"home": home}


def store_from(ctx: click.Context, create: bool = True, runs: tuple[str, ...] = (), option: str = "run",
               any_table: bool = False):
    """The store of --home / EVOSYN_HOME: read (``create=False``) or created; ``runs`` must be in it."""
    from flows.inputs import open_store

    return open_store(ctx.obj.get("home"), create=create, runs=runs, option=option, any_table=any_table)


# ---------------------------------------------------------------- config
@main.group()
def config() -> None:
    """Run configurations."""


@config.command("validate")
@click.argument("file", type=PATH)
def config_validate(file: str) -> None:
    """Check a YAML run config and print the resolved settings."""
    from storage.config import ConfigError, load_config

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
@click.option("--limit", type=int, default=50, show_default=True, help="Rows shown in table format.")
@click.pass_context
def query(ctx: click.Context, sql: str, fmt: str, output: str | None, limit: int) -> None:
    """Run SQL over every store table (runs, tasks, verdicts, …) with DuckDB."""
    import duckdb

    from flows.inputs import check_output, writing
    from storage.catalog import query as run_query

    if fmt == "parquet" and not output:
        raise UserError("--format parquet needs --output PATH")
    target = check_output(output, "--output") if output else None
    try:
        result = run_query(sql, store_from(ctx, create=False))
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"SQL: {first}") from None
    from flows.render import write_result

    if target is None:
        write_result(result, fmt, None, limit)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with writing(target, "--output"):
        write_result(result, fmt, target, limit)


@main.group()
def bench() -> None:
    """Benchmarks: print a table and write JSON (bench-results/ by default)."""


def _register_commands() -> None:
    # command modules attach themselves to `main`; imported here so `--help` lists them
    from flows import cli_envs, cli_faults, cli_learn, cli_llm, cli_run, cli_services, cli_synth  # noqa: F401


def run() -> None:  # console-script entry point
    _register_commands()
    try:
        main(standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    # run through the importable module, where the command modules attach their commands
    from flows.cli import run as _run

    _run()
