"""flows/cli_app.py: the root group attaches the groups of the layers above flows through entry points."""
from importlib.metadata import EntryPoint

import click
import pytest
from click.testing import CliRunner

from evosyn.flows import cli_app
from evosyn.flows.cli import main

BENCH = ["discovery", "faults", "learner", "learning", "llm", "query", "results", "run", "served", "sweep", "synth", "testsets",
         "verify"]


def test_bench_is_attached_through_its_entry_point():
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0 and "bench " in res.output and "query " in res.output
    bench = main.get_command(click.Context(main), "bench")
    assert bench.callback.__module__ == "evosyn.benchmarks.cli" and sorted(bench.commands) == BENCH


@pytest.fixture
def entry_points(monkeypatch):
    def use(*eps: EntryPoint):
        monkeypatch.setattr("importlib.metadata.entry_points",
                            lambda group: [e for e in eps if e.group == group])
    return use


def root() -> cli_app.RootGroup:
    """A root group of its own (not the shared ``main``): one own command, ``query``."""
    return cli_app.RootGroup("evosyn", commands={"query": click.Command("query")})


def test_an_attached_group_is_found_and_listed(entry_points):
    entry_points(EntryPoint("extra", "click:Group", cli_app.ENTRY_POINTS),
                 EntryPoint("other", "click:Group", "not.ours"))
    group = root()
    ctx = click.Context(group)
    assert group.list_commands(ctx) == ["extra", "query"]
    assert group.get_command(ctx, "extra") is click.Group and group.get_command(ctx, "missing") is None
    assert "extra" not in group.commands  # read on demand, not attached
    entry_points()
    assert group.get_command(ctx, "extra") is None  # nothing installed: nothing attached


def test_a_loaded_group_added_to_the_root_is_not_a_clash(entry_points):
    """What a tool that reads ``commands`` needs (mkdocs-click): every listed command added to the group."""
    entry_points(EntryPoint("extra", "click:Group", cli_app.ENTRY_POINTS))
    group = root()
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        group.add_command(group.get_command(ctx, name), name)
    assert sorted(group.commands) == ["extra", "query"] and group.list_commands(ctx) == ["extra", "query"]


def test_a_taken_name_is_refused(entry_points):
    entry_points(EntryPoint("query", "click:Group", cli_app.ENTRY_POINTS))
    with pytest.raises(click.ClickException, match="evosyn.commands:query .* the name is taken"):
        root().list_commands(click.Context(root()))
    entry_points(EntryPoint("x", "a:b", cli_app.ENTRY_POINTS), EntryPoint("x", "c:d", cli_app.ENTRY_POINTS))
    with pytest.raises(click.ClickException, match="evosyn.commands:x"):
        root().get_command(click.Context(root()), "x")
