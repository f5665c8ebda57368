"""`evosyn bench run`: the main job (`evosyn run`) in a fresh store, its wall and CPU by part."""
from __future__ import annotations

import click

from evosyn.flows.cli_app import PATH
from evosyn.flows.cli_fields import FieldIntRange
from evosyn.flows.cli_run import RunFailed
from evosyn.flows.render import print_table


@click.command("run")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--rounds", type=FieldIntRange("RunConfig.rounds"), default=3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--budget", type=FieldIntRange("RunConfig.budget"), default=None,
              help="Blueprints per round (default: the run config's).")
@click.option("--workdir", type=PATH, default=None, help="Where the fresh store goes (kept); default a temporary "
                                                         "folder, removed after.")
@click.option("--output", type=PATH, default=None)
def bench_run(domain: str | None, rounds: int, seed: int, budget: int | None, workdir: str | None,
              output: str | None) -> None:
    """The main job (`evosyn run`) in a fresh store, as a subprocess: wall and CPU by start-up, stage,
    orchestration, tracking and store."""
    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.run import BenchRunError
    from evosyn.benchmarks.run import run as bench
    from evosyn.flows.compile import check_domain
    from evosyn.flows.inputs import bench_output, check_output, writing

    domain = check_domain(domain, generator=True)
    target = bench_output(f"run-{domain}", output)
    if workdir:
        check_output(workdir, "--workdir", kind="dir")
    try:
        result = bench(domain, rounds, seed, budget, workdir)
    except BenchRunError as exc:
        raise RunFailed(str(exc)) from None
    wall, cpu = result["wall_s"], result["cpu_s"]
    print_table(f"run benchmark: {result['command']}", ["group", "part", "wall s", "wall share", "CPU s", "note"],
                [[r["group"], r["part"], f"{r['wall_s']:.2f}", f"{r['wall_s'] / wall:.1%}",
                  "" if r["cpu_s"] is None else f"{r['cpu_s']:.2f}", r["note"]] for r in result["rows"]]
                + [["", "total", f"{wall:.2f}", "100%", f"{cpu:.2f}", f"peak RSS {result['peak_rss_mb']:.0f} MiB"]])
    click.echo(f"start-up + exit {result['startup_wall_s']:.2f}s, orchestration {result['orchestration_wall_s']:.2f}s:"
               f" {result['overhead_wall_share']:.1%} of wall; start-up, exit and Prefect "
               f"{result['overhead_cpu_share']:.1%} of CPU")
    work = result["learner_work"]
    click.echo(f"learner work: {work['evaluated_tasks']} tasks evaluated ({work['evaluate_cpu_ms_per_task']:.1f} ms "
               f"of evaluate's CPU a task), {work['trained_trajectories']} trajectories trained on over the rounds "
               f"({work['train_cpu_ms_per_trajectory']:.1f} ms of train's CPU a trajectory)")
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'run-{domain}', result, target)}")
