"""`evosyn bench sweep`: a small sweep serially and on several Prefect workers; wall, CPU and speed-up."""
from __future__ import annotations

import click

from evosyn.flows.cli_app import PATH, UserError
from evosyn.flows.cli_fields import FieldIntRange
from evosyn.flows.cli_run import RunFailed
from evosyn.flows.render import print_table


@click.command("sweep")
@click.option("--domains", default=None, help="Comma-separated domain packs (default: the first two that run).")
@click.option("--arms", default="evosyn,static", show_default=True)
@click.option("--seeds", default="0,1", show_default=True)
@click.option("--rounds", type=FieldIntRange("RunConfig.rounds"), default=1, show_default=True)
@click.option("--budget", type=FieldIntRange("RunConfig.budget"), default=24, show_default=True)
@click.option("--test-size", type=FieldIntRange("RunConfig.test_size"), default=20, show_default=True)
@click.option("--workers", type=click.IntRange(2, 64), default=2, show_default=True)
@click.option("--workdir", type=PATH, default=None, help="Where the two stores and the server's files go (kept); "
                                                         "default a temporary folder, removed after.")
@click.option("--s3-root", default=None, metavar="s3://BUCKET/PREFIX",
              help="Also run both sweeps on fresh stores under this S3 prefix (the AWS variables reach it).")
@click.option("--output", type=PATH, default=None)
def bench_sweep(domains: str | None, arms: str, seeds: str, rounds: int, budget: int, test_size: int, workers: int,
                workdir: str | None, s3_root: str | None, output: str | None) -> None:
    """The same sweep (domains x arms x seeds) in one process and on WORKERS Prefect process workers sharing one
    store: wall, CPU and speed-up (on 2 cores the ideal is at most 2x), and whether the rows are equal."""
    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.sweep import HEADERS, BenchSweepError, bench, rows, summary
    from evosyn.flows.compile import check_domain
    from evosyn.flows.inputs import bench_output, check_output, writing
    from evosyn.flows.sweep import sweep_domains
    from evosyn.storage.userfiles import ConfigError

    given = [d.strip() for d in domains.split(",") if d.strip()] if domains else []
    try:
        names = sweep_domains(given)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    names = [check_domain(d, "--domains", generator=True, run=True) for d in (names if given else names[:2])]
    arm_list = [a.strip() for a in arms.split(",") if a.strip()]
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"--seeds {seeds}: comma-separated integers, e.g. 0,1") from None
    target = bench_output("sweep", output)
    if workdir:
        check_output(workdir, "--workdir", kind="dir")
    if s3_root is not None and not s3_root.startswith("s3://"):
        raise UserError(f"--s3-root {s3_root}: an s3://bucket/prefix location")
    try:
        result = bench(names, arm_list, seed_list, rounds, budget, test_size, workers, workdir, s3_root)
    except (BenchSweepError, ConfigError) as exc:
        raise RunFailed(str(exc)) from None
    print_table("sweep benchmark", HEADERS, rows(result))
    click.echo(summary(result))
    with writing(target, "--output"):
        click.echo(f"wrote {write_json('sweep', result, target)}")
