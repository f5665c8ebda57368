"""The `evosyn` command group and what every command module shares: the group, `UserError`, `PATH`.

Command modules (``flows/cli_*.py``) import this module and attach their
commands to ``main``; the entry point ``flows/cli.py`` imports them all.
Nothing here imports a command module, so the imports point one way. Layers
above ``flows`` (``benchmarks``: ``evosyn bench``) attach their groups through
the ``evosyn.commands`` entry points (pyproject.toml), so ``flows`` never
imports them.
"""
from __future__ import annotations

import os

import click

import evosyn.storage.offline  # noqa: F401

DEBUG_ENV = "EVOSYN_DEBUG"


def debugging() -> bool:
    """True when ``--debug`` (or ``EVOSYN_DEBUG=1``) asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")

# paths are plain strings to click: its own existence checks print three lines; flows/inputs.py
# checks each path before any work and says what is wrong in one
PATH = click.Path(readable=False)


class UserError(click.ClickException):
    """A one-line error for the user: printed as ``error: …``, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # one line, no usage dump
        click.echo(f"error: {self.format_message()}", err=True)


ENTRY_POINTS = "evosyn.commands"


class RootGroup(click.Group):
    """The root group: its own commands, plus those installed under the ``evosyn.commands`` entry points.

    The entry points are read only when a name is not one of the group's own (or for ``--help``), so a
    command such as ``evosyn query`` does not pay for scanning the installed distributions.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, click.Command] = {}  # an entry point's command once loaded (and maybe added)

    def _attached(self) -> dict:
        from importlib.metadata import entry_points

        found = {}
        for ep in entry_points(group=ENTRY_POINTS):
            # a name of the group's own, unless it is this entry point's command, added after loading it
            taken = ep.name in self.commands and self.commands[ep.name] is not self._loaded.get(ep.name)
            if taken or found.get(ep.name, ep).value != ep.value:
                raise click.ClickException(f"entry point {ENTRY_POINTS}:{ep.name} ({ep.value}): the name is taken "
                                           f"(evosyn's own: {', '.join(sorted(self.commands))})")
            found[ep.name] = ep
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._attached()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        own = super().get_command(ctx, name)
        if own is not None:
            return own
        ep = self._attached().get(name)
        if ep is None:
            return None
        if name not in self._loaded:
            self._loaded[name] = ep.load()
        return self._loaded[name]


@click.group(cls=RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=PATH, envvar="EVOSYN_HOME", help="Store root (default ./.evosyn, env EVOSYN_HOME).")
@click.option("--debug", is_flag=True, envvar=DEBUG_ENV,
              help=f"Show the traceback of an unexpected error instead of one line (env {DEBUG_ENV}=1).")
@click.pass_context
def main(ctx: click.Context, home: str | None, debug: bool) -> None:
    """EvoSyn: closed-loop synthesis of training data for tool-using agents."""
    if debug:  # child processes (Prefect workers, benchmark runs) inherit it
        os.environ[DEBUG_ENV] = "1"
    # not from evosyn.config: it imports pydantic (0.1 s), which `evosyn query` does without
    from evosyn.storage.userfiles import ConfigError, load_dotenv_secrets

    try:
        load_dotenv_secrets()
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    ctx.obj = {"home": home}
