"""benchmarks/common.py: every bench JSON records the machine, its load, the command line and the seeds."""
import json
import os

import click
import pytest
from click.testing import CliRunner

from evosyn.benchmarks.cli import bench
from evosyn.benchmarks.common import cpu_model, spread, write_json
from evosyn.flows.cli import main


@click.command("probe")
@click.option("--seeds", default="0-2", show_default=True)
@click.option("--size", type=int, default=7)
@click.option("--gap", "gaps", multiple=True)
@click.option("--fast", is_flag=True)
@click.option("--name", default=None)
@click.option("--output", required=True)
def probe(seeds, size, gaps, fast, name, output):
    click.echo(f"wrote {write_json('probe-airline', {'figure': 1.5}, output)}")


@pytest.fixture
def with_probe(monkeypatch):
    monkeypatch.setitem(bench.commands, "probe", probe)  # under the real group: its start stamp is what is read


def test_the_json_records_machine_load_command_and_seeds(tmp_path, with_probe):
    out = tmp_path / "p.json"
    res = CliRunner().invoke(main, ["bench", "--note", "2 CPUs shared", "probe", "--gap", "a=b", "--gap", "c d", "--fast",
                                     "--output", str(out)])
    assert res.exit_code == 0, res.output
    got = json.loads(out.read_text())
    assert got["benchmark"] == "probe-airline" and got["figure"] == 1.5
    inv, m = got["invocation"], got["machine"]
    # every option spelled out, defaults too; a flag without a value; a repeated option repeated; None left out
    assert inv["command"] == (f"evosyn bench probe --seeds 0-2 --size 7 --gap a=b --gap 'c d' --fast "
                              f"--output {out}")
    assert inv["seeds"] == "0-2" and inv["seconds"] >= 0
    assert m["note"] == "2 CPUs shared" and m["cpus"] == os.cpu_count() and m["cpu_model"]
    assert len(m["load_average_start"]) == len(m["load_average_end"]) == 3


def test_without_a_note_or_a_flag(tmp_path, with_probe):
    out = tmp_path / "p.json"
    assert CliRunner().invoke(main, ["bench", "probe", "--seeds", "4", "--output", str(out)]).exit_code == 0
    got = json.loads(out.read_text())
    assert got["machine"]["note"] is None and "--fast" not in got["invocation"]["command"]
    assert got["invocation"]["seeds"] == "4"


def test_outside_a_command_the_invocation_is_unknown(tmp_path):
    got = json.loads(write_json("x", {}, tmp_path / "x.json").read_text())
    assert got["invocation"] == {"command": None, "seeds": None, "seconds": None}
    assert got["machine"]["load_average_start"] is None and got["machine"]["load_average_end"]


def test_spread_and_cpu_model():
    assert spread([3.0, 1.0, 2.0, 10.0]) == {"min": 1.0, "median": 2.5, "max": 10.0, "n": 4}
    assert isinstance(cpu_model(), str) and cpu_model()
