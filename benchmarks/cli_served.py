"""`evosyn bench served`: a served learner with a planted weakness, and the seeds in which each arm's Reflector adopts
the property behind it (benchmarks/served.py)."""
from __future__ import annotations

import os
from pathlib import Path

import click
from evosyn.flows.cli_app import PATH, UserError
from evosyn.flows.cli_fields import FieldIntRange
from evosyn.flows.render import print_table


@click.command("served")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--seeds", default="0-2", show_default=True, help="LO-HI (inclusive), one seed, or a list: 0,2,5.")
@click.option("--rounds", type=FieldIntRange("RunConfig.rounds", min=2), default=3, show_default=True,
              help="Rounds per run; a factor counts as adopted when a reflection of rounds 1..R-1 promotes it.")
@click.option("--budget", type=FieldIntRange("RunConfig.budget"), default=150, show_default=True)
@click.option("--test-size", "test_size", type=FieldIntRange("RunConfig.test_size"), default=20, show_default=True,
              help="Blueprints of each fixed test set (not used by adoption: keep it small).")
@click.option("--probe-size", "probe_size", type=FieldIntRange("RunConfig.probe_size"), default=None,
              help="The runs' probe_size (default: the runs' own, the budget at most 300).")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--home", "bench_home", type=PATH, default=None, help="The store of the runs.")
@click.option("--output", type=PATH, default=None, help="JSON (default bench-results/served-<domain>.json).")
@click.pass_context
def bench_served(ctx, domain, seeds, rounds, budget, test_size, probe_size, jobs, bench_home, output) -> None:
    """A scripted served learner that fails every task with two or more writes (benchmarks/served_agent.py): the
    seeds in which the evosyn arm and the no_feedback control adopt num_write in rounds 1..R-1."""
    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.learning import BenchInputError, BenchRunError, parse_seeds
    from evosyn.benchmarks.served import adoption_lines, bench, bucket_lines
    from evosyn.flows.cli_run import RunFailed
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.inputs import bench_output, check_store_root, writing
    from evosyn.tasks.reports.compare import no_nan

    try:
        seed_list = parse_seeds(seeds)
    except BenchInputError as exc:
        raise UserError(str(exc)) from None
    env = compile_domain(domain, generator=True).env
    home = Path(bench_home or (ctx.obj or {}).get("home") or os.environ.get("EVOSYN_HOME") or ".evosyn").expanduser()
    check_store_root(home)
    target = bench_output(f"served-{env.name}", output)
    try:
        result = bench(env, seed_list, home.resolve(), rounds=rounds, budget=budget, test_size=test_size,
                       probe_size=probe_size, jobs=jobs, say=click.echo)
    except BenchRunError as exc:
        raise RunFailed(str(exc)) from None
    result["command"] = (f"evosyn bench served --domain {env.name} --seeds {seeds} --rounds {rounds} --budget {budget} "
                         f"--test-size {test_size} --probe-size {result['probe_size']} --jobs {jobs}")
    t = result["target"]
    print_table(f"planted weakness ({result['property']} in {', '.join(result['weak_buckets'])} always fails): "
                f"{env.name}, seeds {seeds}, {rounds} rounds x {budget} blueprints, test sets of {test_size}, a probe "
                f"set of {result['probe_size']} per round, served max_concurrency {result['max_concurrency']}, "
                f"max_steps {result['max_steps']} (target: evosyn >= {t['evosyn_at_least']}, no_feedback <= "
                f"{t['no_feedback_at_most']} of {len(seed_list)})",
                ["arm", f"{result['property']} adopted", "per seed (round, rule)", "all promoted (round)"],
                adoption_lines(result))
    print_table("the served agent's success over every evaluation of the runs, by the task's write count",
                [result["property"], "evaluations", "success", "planted to fail"], bucket_lines(result))
    a = result["agent"]
    click.echo(f"met: {'yes' if result['met'] else 'no'}; the agent answered {a['requests']} requests, closed "
               f"{a['closed_before_a_write']} conversations before a second write, could not place {a['misses']}; "
               f"{result['runs_launched']} runs launched, {result['runs_reused']} reused; wall "
               f"{result['wall_s']:.1f}s, CPU {result['cpu_s']:.1f}s")
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'served-{env.name}', no_nan(result), target)}")
