"""The `evosyn` command group and what every command module shares: the group, `bench`, `UserError`, `PATH`.

Command modules (``flows/cli_*.py``) import this module and attach their
commands to ``main`` / ``bench``; the entry point ``flows/cli.py`` imports them
all. Nothing here imports a command module, so the imports point one way.
"""
from __future__ import annotations

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
    # not from storage.config: it imports pydantic (0.1 s), which `evosyn query` does without
    from storage.userfiles import ConfigError, load_dotenv_secrets

    try:
        load_dotenv_secrets()
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    ctx.obj = {"home": home}


@main.group()
def bench() -> None:
    """Benchmarks: print a table and write JSON (bench-results/ by default)."""
