"""`evosyn sweep`: domains x arms x seeds, as subflows of this process or as flow runs on Prefect workers."""
from __future__ import annotations

import click

from evosyn.flows.cli_app import PATH, UserError, main
from evosyn.flows.cli_run import (QUIET, RunFailed, compare, compiled, import_run_flow, prefect_api, print_summary,
                                  reported_in_one_line)
from evosyn.flows.render import print_table


@main.command()
@click.option("--config", "config_file", type=PATH, required=True,
              help="YAML with a base run config plus `sweep: {domains, arms, seeds}` (and optionally submit, "
                   "deployment).")
@click.option("--submit", type=click.Choice(["inline", "deployment"]), default=None,
              help="inline: every run a subflow of this process (the default); deployment: every run a flow run "
                   "of the evosyn-run deployment, taken by its work pool's workers (`evosyn up`, `evosyn deploy`).")
@click.option("--deployment", default=None, help="The deployment of --submit deployment "
                                                 "(default: evosyn-run/evosyn-run).")
@click.option("--timeout", type=click.FloatRange(min=1), default=None,
              help="With --submit deployment: stop waiting after this many seconds (the flow runs go on).")
@QUIET
@click.pass_context
def sweep(ctx, config_file, submit, deployment, timeout, quiet) -> None:
    """Domains x arms x seeds as subflows, or as flow runs on Prefect workers (--submit deployment)."""
    from evosyn.flows.inputs import check_store_root
    from evosyn.storage.userfiles import ConfigError

    try:
        from evosyn.flows.sweep import load_sweep

        base, grid = load_sweep(config_file, ctx.obj.get("home"))
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    from evosyn.flows.compile import check_domain

    grid["domains"] = [check_domain(d, "sweep.domains", generator=True, run=True) for d in grid["domains"]]
    for d in grid["domains"]:  # each domain's run through the compile step (its data folder too), before any run
        compiled(base.model_copy(update={"domain": d}))
    check_store_root(base.store_root())
    grid["submit"] = submit or grid.get("submit", "inline")
    grid["deployment"] = deployment or grid.get("deployment") or "evosyn-run/evosyn-run"
    api = prefect_api(base.store_root(), meanwhile=import_run_flow)
    if grid["submit"] == "deployment":
        ctx.invoke(compare, run_ids=_sweep_on_workers(base, grid, api, timeout, quiet), output=None)
        return
    from evosyn.flows.progress import renderer
    from evosyn.flows.sweep import sweep_flow

    with reported_in_one_line(base.store_location(), None, base.store.tracking_uri), \
            renderer(quiet, with_run=True) as show:
        results = sweep_flow(base, **grid, progress=show)
    for summary in results:
        print_summary(summary)
    ctx.invoke(compare, run_ids=tuple(s.run_id for s in results), output=None)


def _sweep_on_workers(base, grid: dict, api: str, timeout: float | None, quiet: bool) -> tuple[str, ...]:
    """`evosyn sweep --submit deployment`: submit, wait, print each cell's flow run; the run ids to compare."""
    from evosyn.flows.cli_services import pools_without_worker, worker_hint
    from evosyn.flows.progress import renderer
    from evosyn.flows.sweep import sweep_flow
    from evosyn.flows.sweep_workers import SweepError, check_deployment, failed_line

    try:
        pool = check_deployment(grid["deployment"])
    except SweepError as exc:
        raise UserError(str(exc)) from None
    for name, why in pools_without_worker(api, (pool,) if pool else ()).items():
        click.echo(worker_hint(name, why, api), err=True)  # the runs wait for one: said, not refused
    try:
        with reported_in_one_line(), renderer(quiet, with_run=True) as show:
            cells = sweep_flow(base, **grid, progress=show, timeout=timeout)
    except SweepError as exc:
        raise RunFailed(str(exc)) from None
    print_table(f"sweep on {grid['deployment']}", ["run", "flow run", "state"],
                [[c.run_id, c.flow_run_name or "-", c.state.lower()] for c in cells])
    if (line := failed_line(cells)) is not None:
        raise RunFailed(line)
    return tuple(c.run_id for c in cells)

