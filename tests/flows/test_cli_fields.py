"""The CLI's choices and bounds are the config models': read from the field an option sets, when click needs them."""
import subprocess
import sys
import typing

import click
import pytest
from click.testing import CliRunner

from evosyn.flows.cli_fields import FieldChoice, FieldFloatRange, FieldIntRange


def every_command(group: click.Group) -> list[click.Command]:
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        out += [cmd, *(every_command(cmd) if isinstance(cmd, click.Group) else [])]
    return out


def test_every_field_type_of_the_cli_reads_its_field():
    from evosyn.config import DedupConfig, RunConfig
    from evosyn.flows.cli import main

    types = {p.name: p.type for cmd in every_command(main) for p in cmd.params
             if isinstance(p.type, (FieldChoice, FieldIntRange, FieldFloatRange))}
    assert {"arm", "backend", "learner", "rounds", "budget", "threshold", "test_size"} <= set(types)
    for param in types.values():  # each names a field that exists, of its kind
        assert param.choices if isinstance(param, FieldChoice) else param.bounds
    assert types["arm"].choices == typing.get_args(RunConfig.model_fields["arm"].annotation)
    assert (types["budget"].min, types["budget"].max) == (1, 1_000_000)
    info = types["threshold"].to_info_dict()  # what click (and mkdocs-click) read of a range
    assert (info["min"], info["max"], info["min_open"], info["max_open"]) == (0.0, 1.0, True, False)
    assert [m.gt for m in DedupConfig.model_fields["threshold"].metadata if getattr(m, "gt", None) is not None] == [0.0]


def test_the_types_convert_and_refuse_as_clicks_own():
    rounds, narrowed = FieldIntRange("RunConfig.rounds"), FieldIntRange("RunConfig.rounds", min=2)
    assert rounds.convert("50", None, None) == 50 and narrowed.convert("2", None, None) == 2
    with pytest.raises(click.BadParameter, match="0 is not in the range 1<=x<=50"):
        rounds.convert("0", None, None)
    with pytest.raises(click.BadParameter, match="1 is not in the range 2<=x<=50"):  # narrowed, the model's top
        narrowed.convert("1", None, None)
    threshold = FieldFloatRange("DedupConfig.threshold")
    with pytest.raises(click.BadParameter, match="0.0 is not in the range 0.0<x<=1.0"):
        threshold.convert("0", None, None)
    provider = FieldChoice("RoleConfig.provider")  # Literal[...] | None: the Literal's values
    assert provider.choices == ("openai", "anthropic", "openai_compatible")
    with pytest.raises(TypeError, match="not a float field"):
        _ = FieldFloatRange("RunConfig.rounds").bounds
    with pytest.raises(TypeError, match="no Literal"):
        _ = FieldChoice("RunConfig.rounds").choices


def test_a_bad_option_is_refused_before_any_work(tmp_path):
    from evosyn.flows.cli import main

    result = CliRunner().invoke(main, ["--home", str(tmp_path), "run", "--arm", "bogus"])
    assert result.exit_code == 2
    assert "'bogus' is not one of 'evosyn', 'static', 'no_feedback', 'no_reflector', 'no_designer', " \
           "'single_agent'" in result.output
    result = CliRunner().invoke(main, ["--home", str(tmp_path), "run", "--budget", "0"])
    assert result.exit_code == 2 and "0 is not in the range 1<=x<=1000000" in result.output
    assert not (tmp_path / "tables").exists()


def test_the_cli_starts_without_the_config_models():
    """`evosyn query` does without pydantic: declaring an option that reads a field does not import the models."""
    done = subprocess.run([sys.executable, "-c", "import sys, evosyn.flows.cli; "
                           "print(sorted(m for m in ('evosyn.config', 'pydantic') if m in sys.modules))"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
