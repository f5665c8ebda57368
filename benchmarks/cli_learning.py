"""`evosyn bench learning`: arms x seeds of the closed loop, with bootstrap intervals (benchmarks/learning.py)."""
from __future__ import annotations

import math
import os
from pathlib import Path

import click

from evosyn.flows.cli_app import PATH, UserError
from evosyn.flows.cli_fields import FieldIntRange
from evosyn.flows.render import print_table


def _ci(row: dict, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(row['mean'])} [{f.format(row['lo'])}, {f.format(row['hi'])}]"


def _num(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _ranged(v: float | None, span: list[float] | None) -> str:
    return _num(v) + (f" [{span[0]:+.2f}, {span[1]:+.2f}]" if span and span[0] != span[1] else "")


def print_learning(result: dict) -> None:
    pct = int(result["level"] * 100)
    seeds = ",".join(map(str, result["seeds"]))
    print_table(f"test success per round: mean over seeds {seeds} [{pct}% CI, two-level bootstrap, "
                f"{result['resamples']} resamples]",
                ["set", "tasks", "round", "arm", "mean [CI]", "per seed"],
                [[r["set"], r["n_tasks"], r["round"], r["arm"], _ci(r),
                  " ".join(f"{v:.3f}" for v in r["per_seed"].values())] for r in result["success"]])
    if result["paired"]:
        print_table(f"paired difference (by seed and task) [{pct}% CI]", ["set", "round", "difference", "mean [CI]",
                                                                         "CI above 0"],
                    [[r["set"], r["round"], f"{r['a']} - {r['b']}", _ci(r, signed=True), "yes" if r["lo"] > 0 else
                      "no"] for r in result["paired"]])
    metrics = sorted({r["metric"] for r in result["intrinsic"]}, key=["factor_coverage", "factor_balance",
                                                                       "interaction_coverage",
                                                                       "trajectory_diversity"].index)
    cells = {(r["arm"], r["round"], r["metric"]): r for r in result["intrinsic"]}
    print_table(f"intrinsic metrics of the verified data so far: mean over seeds [{pct}% CI]",
                ["arm", "round", *metrics],
                [[a, rnd, *(_ci(cells[(a, rnd, m)]) for m in metrics)]
                 for a, rnd in dict.fromkeys((r["arm"], r["round"]) for r in result["intrinsic"])])
    if result["controllability"]:
        print_table("controllability of evosyn's promoted factors, before the verifier's factor gate",
                    ["factor", "round", "seeds", "exact", "spearman", "requested", "realized"],
                    [[c["factor"], c["round"], c["seeds"], _num(c["exact"]), _num(c["spearman"]), c["n_requested"],
                      c["n_realized"]] for c in result["controllability"]])
    else:
        click.echo("controllability: evosyn promoted no factor in these runs")
    if result.get("adaptation"):
        print_table("within-space adaptation: a slice's allocation gain (its share of the round's verified data "
                    "minus the previous round's) against its success gap (the previous learner's success on the "
                    "set minus on the slice); mean over seeds [range]",
                    ["arm", "set", "round", "seeds", "slices", "gap-allocation spearman", "targeted improvement rate"],
                    [[a["arm"], a["set"], a["round"], a["seeds"], a["slices"], _ranged(a["spearman"],
                                                                                       a["spearman_range"]),
                      _ranged(a["targeted_improvement_rate"], a["rate_range"])] for a in result["adaptation"]])
    _print_slices(result["slices"], pct)
    click.echo(f"{result['runs_launched']} runs launched, {result['runs_reused']} reused; wall {result['wall_s']:.1f}s"
               f" (runs {result['runs_wall_s']:.1f}s, {result['jobs']} at a time), CPU {result['cpu_s']:.1f}s")


def _print_slices(found: dict, pct: int) -> None:
    from evosyn.benchmarks.learning_slices import largest

    rows = largest(found["rows"])
    if rows:
        print_table(f"where the last round's paired difference comes from: the slices that weigh most [{pct}% CI]",
                    ["set", "round", "slice", "tasks", "success per arm", "difference", "mean [CI]",
                     "share of the set's difference"],
                    [[r["set"], r["round"], f"{r['factor']}={r['value']}", r["n_tasks"],
                      " ".join(f"{a} {v:.3f}" for a, v in r["success"].items()), f"{r['a']} - {r['b']}",
                      _ci(r, signed=True), f"{r['contribution']:+.3f}"] for r in rows])
    for u in found["unsolved"]:
        click.echo(f"no arm solves a task of {u['factor']}={u['value']} on {u['set']} in any round "
                   f"({u['n_tasks']} tasks, {u['share']:.0%} of the set)")


@click.command("learning")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--seeds", default="0-4", show_default=True, help="LO-HI (inclusive), one seed, or a list: 0,2,5.")
@click.option("--arms", default="evosyn,static,no_feedback", show_default=True,
              help="Comma-separated arms; the paired differences are evosyn - each other arm.")
@click.option("--rounds", type=FieldIntRange("RunConfig.rounds"), default=3, show_default=True)
@click.option("--budget", type=FieldIntRange("RunConfig.budget"), default=200, show_default=True,
              help="Blueprints per round, every arm.")
@click.option("--test-size", "test_size", type=FieldIntRange("RunConfig.test_size"), default=300, show_default=True,
              help="Blueprints of each fixed test set.")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Runs at a time (each an `evosyn run` subprocess).")
@click.option("--home", "bench_home", type=PATH, default=None,
              help="The store of the runs (default: evosyn's --home / EVOSYN_HOME / ./.evosyn); finished runs "
                   "in it are reused.")
@click.option("--output", type=PATH, default=None, help="JSON (default bench-results/learning-<domain>.json).")
@click.pass_context
def bench_learning(ctx, domain, seeds, arms, rounds, budget, test_size, jobs, bench_home, output) -> None:
    """Every (arm, seed) as a normal run on one store (stop rule off: same rounds and budget), then test success
    per round with two-level bootstrap intervals, paired differences vs evosyn, intrinsic metrics and the
    controllability of evosyn's promoted factors."""
    from evosyn.benchmarks.common import write_json
    from evosyn.tasks.reports.compare import no_nan
    from evosyn.benchmarks.learning import (
        BenchInputError,
        BenchRunError,
        Plan,
        bench,
        parse_arms,
        parse_seeds,
    )
    from evosyn.flows.cli_run import RunFailed
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.inputs import bench_output, check_store_root, writing

    try:
        seed_list, arm_list = parse_seeds(seeds), parse_arms(arms)
    except BenchInputError as exc:
        raise UserError(str(exc)) from None
    env = compile_domain(domain, generator=True).env
    domain = env.name
    home = Path(bench_home or (ctx.obj or {}).get("home") or os.environ.get("EVOSYN_HOME") or ".evosyn").expanduser()
    check_store_root(home)
    target = bench_output(f"learning-{domain}", output)
    plan = Plan(domain=domain, seeds=seed_list, home=home.resolve(), arms=arm_list, rounds=rounds, budget=budget,
                test_size=test_size, jobs=jobs)
    try:
        result = bench(plan, env, say=click.echo)
    except BenchRunError as exc:
        raise RunFailed(str(exc)) from None
    result["command"] = (f"evosyn bench learning --domain {domain} --seeds {seeds} --arms {','.join(arm_list)} "
                         f"--rounds {rounds} --budget {budget} --test-size {test_size} --jobs {jobs}")
    print_learning(result)
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'learning-{domain}', no_nan(result), target)}")


@click.command("discovery")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--seeds", default="0-2", show_default=True, help="LO-HI (inclusive), one seed, or a list: 0,2,5.")
@click.option("--gap", "gaps", multiple=True, metavar="PROPERTY=BUCKET",
              help="A planted gap (repeatable; default: three of the domain's controllable properties).")
@click.option("--keep", type=click.FloatRange(0, 1), default=0.2, show_default=True,
              help="Probability that the generator keeps a plan in the planted bucket.")
@click.option("--rounds", type=FieldIntRange("RunConfig.rounds", min=2), default=3, show_default=True,
              help="Rounds per run; a factor counts as adopted when a reflection of rounds 1..R-1 promotes it.")
@click.option("--budget", type=FieldIntRange("RunConfig.budget"), default=300, show_default=True)
@click.option("--test-size", "test_size", type=FieldIntRange("RunConfig.test_size"), default=20, show_default=True,
              help="Blueprints of each fixed test set (not used by recovery: keep it small).")
@click.option("--diagnose-size", "diagnose_size", type=click.IntRange(0, 10_000), default=300, show_default=True,
              help="Blueprints of the uniform set each evosyn round's model is scored on to rank the planted "
                   "bucket among the run's coverage gaps (0: no diagnosis).")
@click.option("--probe-size", "probe_size", type=FieldIntRange("RunConfig.probe_size"), default=None,
              help="The runs' probe_size: a balanced probe set per round that the feedback arm's Reflector also "
                   "reads (0: the diagnostic set only). Default: the runs' own (the budget, at most 300).")
@click.option("--writes", type=click.Choice(["default", "even"]), default="default", show_default=True,
              help="The background's write counts of a fulfilment: the generator's default prior (mostly one "
                   "write) or even over the num_write buckets 1 / 2 / 3-4 / 5+ (prior.writes).")
@click.option("--space", "space", type=click.Choice(["initial", "paper"]), default="initial", show_default=True,
              help="The space the runs start from: the pack's initial space, or it plus num_write and num_read "
                   "(the paper's adopted factors; initial_factors), so gaps are planted beyond them.")
@click.option("--factor", "factors", multiple=True, metavar="PROPERTY",
              help="A controllable property added to the space the runs start from (repeatable; not a planted "
                   "gap's), e.g. a natural gap of the domain, so the planted gaps lie beyond it.")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--home", "bench_home", type=PATH, default=None, help="The store of the runs (finished runs reused).")
@click.option("--output", type=PATH, default=None, help="JSON (default bench-results/discovery-<domain>.json).")
@click.pass_context
def bench_discovery(ctx, domain, seeds, gaps, keep, rounds, budget, test_size, diagnose_size, probe_size, writes,
                    space, factors, jobs, bench_home, output) -> None:
    """Planted-gap recovery (App. B.6): per planted gap, the seeds in which the evosyn arm and the no_feedback
    control promote the planted property to a factor."""
    from evosyn.benchmarks.common import write_json
    from evosyn.tasks.reports.compare import no_nan
    from evosyn.benchmarks.discovery import SPACES, GapError, bench as run_bench, check_factors, gaps_for
    from evosyn.benchmarks.discovery_gaps import GAP_SHARE
    from evosyn.benchmarks.learning import BenchInputError, BenchRunError, parse_seeds
    from evosyn.flows.cli_run import RunFailed
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.inputs import bench_output, check_store_root, writing

    try:
        seed_list = parse_seeds(seeds)
    except BenchInputError as exc:
        raise UserError(str(exc)) from None
    env = compile_domain(domain, generator=True).env
    domain = env.name
    try:
        planted = gaps_for(env, list(gaps), space=tuple(SPACES[space]))
        if not planted:
            raise GapError(f"--domain {domain}: its generator controls no property outside the runs' initial space "
                           "to plant a gap on; name one with --gap PROPERTY=BUCKET")
        added = check_factors(env, list(factors), planted)
    except GapError as exc:
        raise UserError(str(exc)) from None
    home = Path(bench_home or (ctx.obj or {}).get("home") or os.environ.get("EVOSYN_HOME") or ".evosyn").expanduser()
    check_store_root(home)
    target = bench_output(f"discovery-{domain}", output)
    try:
        result = run_bench(env, seed_list, home.resolve(), gaps=planted, keep=keep, rounds=rounds, budget=budget,
                           test_size=test_size, diagnose_size=diagnose_size, probe_size=probe_size, jobs=jobs,
                           writes=writes, space=space, factors=added, say=click.echo)
    except BenchRunError as exc:
        raise RunFailed(str(exc)) from None
    probes = result["probe_size"]  # the runs' default where the option is not given
    result["command"] = (f"evosyn bench discovery --domain {domain} --seeds {seeds} "
                         + "".join(f"--gap {g} " for g in result["gaps"])
                         + f"--keep {keep} --rounds {rounds} --budget {budget} --test-size {test_size} "
                         f"--diagnose-size {diagnose_size} --probe-size {probes} --writes {writes} --space {space}"
                         + "".join(f" --factor {f}" for f in added))
    t = result["target"]
    print_table(f"planted-gap recovery: {domain}, seeds {seeds}, {rounds} rounds x {budget} blueprints, "
                f"{f'a probe set of {probes} per round, ' if probes else 'no probe set, '}"
                f"{'even write counts, ' if writes == 'even' else ''}"
                f"{'num_write and num_read in the space, ' if space == 'paper' else ''}"
                f"{''.join(f'{f} in the space, ' for f in added)}planted "
                f"bucket kept with p = {keep} (target: evosyn >= {t['evosyn_at_least']}, no_feedback <= "
                f"{t['no_feedback_at_most']} of {len(seed_list)})",
                ["gap", "arm", "adopted", "per seed (round, rule)", "all promoted (round)"],
                [[r["gap"], r["arm"], f"{r['recovered']}/{r['seeds']}",
                  " ".join(f"s{s['seed']}:{'r%d %s' % (s['round'], s['rule']) if s['recovered'] else '-'}"
                           for s in r["per_seed"]),
                  " | ".join(",".join(f"{p['factor']}({p['round']})" for p in s["promoted"]) or "-"
                             for s in r["per_seed"])]
                 for r in result["rows"]])
    if result["diagnosis"]:
        d = result["diagnosis"]
        print_table(f"why (evosyn): the planted bucket among the run's coverage gaps (coverage < {GAP_SHARE:g} of a "
                    f"uniform share, failing more than the property's other buckets) on {d['tasks']} uniform "
                    "tasks; a gap out-ranks another by its failure excess",
                    ["gap", "seed", "round", "planted coverage", "planted fail / elsewhere", "rank", "out-ranked by"],
                    [[r["gap"], s["seed"], x["round"], _num(x["planted"]["coverage"]),
                      f"{_num(x['planted']['fail'])} / {_num(x['planted']['fail_elsewhere'])} "
                      f"(n={x['planted']['n']})",
                      "in space" if x["in_space"] else f"{x['rank'] or '-'}/{x['gaps']}",
                      ", ".join(f"{g['gap']} {g['fail']:.2f}" for g in x["outranked_by"][:3]) or "-"]
                     for r in result["rows"] if r["arm"] == "evosyn" for s in r["per_seed"]
                     for x in s.get("diagnosis", [])])
    click.echo("met: " + ", ".join(f"{v['gap']} {'yes' if v['met'] else 'no'}" + _weakness(v) for v in result["verdicts"])
               + f"; {result['runs_launched']} runs launched, {result['runs_reused']} reused; wall "
               f"{result['wall_s']:.1f}s, CPU {result['cpu_s']:.1f}s")
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'discovery-{domain}', no_nan(result), target)}")


def _weakness(verdict: dict) -> str:
    """`` (not a weakness: ...)`` after a gap whose planted bucket the learner never fails more often in."""
    if verdict.get("weakness") in (None, "yes"):
        return ""
    return (f" ({'not a weakness' if verdict['weakness'] == 'no' else 'a weakness'} of the learner: it fails the "
            f"planted bucket more often than elsewhere in {verdict['weaker_in']} of {verdict['diagnosed']} "
            "diagnosed reflections)")
