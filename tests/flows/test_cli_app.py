"""flows/cli_app.py: the root group attaches the groups of the layers above flows through entry points."""
from importlib.metadata import EntryPoint

import click
import pytest
from click.testing import CliRunner

from flows import cli_app
from flows.cli import main

BENCH = ["discovery", "faults", "learner", "learning", "llm", "query", "results", "run", "synth", "testsets",
         "verify"]


def test_bench_is_attached_through_its_entry_point():
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0 and "bench " in res.output and "query " in res.output
    bench = main.get_command(click.Context(main), "bench")
    assert bench.callback.__module__ == "benchmarks.cli" and sorted(bench.commands) == BENCH
    assert "bench" not in main.commands  # not one of flows' own: flows never imports benchmarks


@pytest.fixture
def entry_points(monkeypatch):
    def use(*eps: EntryPoint):
        monkeypatch.setattr("importlib.metadata.entry_points",
                            lambda group: [e for e in eps if e.group == group])
    return use


def test_an_attached_group_is_found_and_listed(entry_points):
    entry_points(EntryPoint("extra", "click:Group", cli_app.ENTRY_POINTS),
                 EntryPoint("other", "click:Group", "not.ours"))
    ctx = click.Context(main)
    assert "extra" in main.list_commands(ctx) and "other" not in main.list_commands(ctx)
    assert main.get_command(ctx, "extra") is click.Group
    assert main.get_command(ctx, "missing") is None
    entry_points()
    assert main.get_command(ctx, "bench") is None  # nothing installed: no bench, and no import of benchmarks


def test_a_taken_name_is_refused(entry_points):
    entry_points(EntryPoint("query", "click:Group", cli_app.ENTRY_POINTS))
    with pytest.raises(click.ClickException, match="evosyn.commands:query .* the name is taken"):
        main.list_commands(click.Context(main))
    entry_points(EntryPoint("x", "a:b", cli_app.ENTRY_POINTS), EntryPoint("x", "c:d", cli_app.ENTRY_POINTS))
    with pytest.raises(click.ClickException, match="evosyn.commands:x"):
        main.get_command(click.Context(main), "x")
