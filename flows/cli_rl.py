"""``evosyn export --format verifiers | rl-jsonl``: a run's verified tasks as RL environments
(``evosyn.tasks.exports.rl``)."""
from __future__ import annotations

import json

import click

from evosyn.flows.cli_app import UserError
from evosyn.flows.inputs import store_from


def export_rl(ctx: click.Context, run_id: str, round_: int | None, fmt: str, output: str,
              slices: tuple[str, ...], window: str | None = None) -> None:
    from evosyn import __version__
    from evosyn.flows.compile import stored_domain
    from evosyn.flows.inputs import check_output, writing
    from evosyn.tasks.exports.rl import (module_name, parse_slices, parse_window, rl_rows, write_rl_jsonl,
                                          write_verifiers_package)
    from evosyn.tasks.learn import run_domain

    try:
        wanted = parse_slices(slices)
        bounds = parse_window(window) if window else None
    except ValueError as exc:
        raise UserError(str(exc)) from None
    store = store_from(ctx, create=False, runs=(run_id,), option="--run", any_table=True)
    out = check_output(output, "--output", kind="dir")
    env = stored_domain(run_domain(store, run_id))
    for run in store.read_records("runs", run_id=run_id):
        if json.loads(run.config_json).get("env_data", {}).get(env.name):
            raise UserError(f"--run {run_id}: its {env.name} environment reads its own data folder (env_data); "
                            "RL exports load the default data, so its tasks cannot be exported yet")
    try:
        exported = rl_rows(store, run_id, env, round_, wanted, bounds)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not exported.rows:
        why = "".join(f"; {r}: {k}" for r, k in exported.dropped.most_common())
        raise UserError(f"--run {run_id}: no verified tasks to export (in {store.root}{why})")
    with writing(out, "--output"):
        out.mkdir(parents=True, exist_ok=True)
        if fmt == "rl-jsonl":
            write_rl_jsonl(exported.rows, out)
        else:
            write_verifiers_package(exported.rows, out, run_id, env.name, __version__)
    why = "".join(f"; {r}: {k}" for r, k in exported.dropped.most_common())
    click.echo(f"exported {len(exported.rows)} tasks ({fmt}) to {out}; held out {exported.held_out} diagnostic"
               f"{why}")
    if fmt == "verifiers":
        dist = module_name(run_id).replace("_", "-")
        click.echo(f"  pip install -e {out}\n  python -c \"import verifiers as vf; "
                   f"print(vf.load_environment('{dist}'))\"")
