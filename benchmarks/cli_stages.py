"""`evosyn bench synth`, `testsets`, `verify`, `learner`: one stage of the round at a time, timed on its own."""
from __future__ import annotations

import click

from evosyn.flows.cli_app import PATH, UserError
from evosyn.flows.cli_fields import FieldIntRange
from evosyn.flows.cli_synth import run_synth
from evosyn.flows.cli_testsets import show
from evosyn.flows.inputs import store_from
from evosyn.flows.render import print_table


@click.command("synth")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--n", "n", type=click.IntRange(1, 1_000_000), default=500, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--output", type=PATH, default=None)
@click.pass_context
def bench_synth(ctx, domain: str, n: int, seed: int, output: str | None) -> None:
    """Verified tasks per second end to end, with a per-stage time breakdown."""
    import time

    import evosyn.tasks.synthesis  # noqa: F401 - start-up (imports), not synthesis: before the clocks start
    from evosyn.benchmarks.common import write_json
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.inputs import bench_output, writing

    # the domain's environment (tau2's modules and its DB), loaded once per process whatever N is: timed apart.
    # Its pack's checks load it, so the compile step is what is timed (a later look-up would find it loaded)
    t0, c0 = time.perf_counter(), time.process_time()
    env = compile_domain(domain, generator=True).env
    load, load_cpu = time.perf_counter() - t0, time.process_time() - c0
    domain = env.name
    target = bench_output(f"synth-{domain}", output)
    run_id = f"bench-synth-s{seed}"
    store_from(ctx).delete_run(run_id)  # the last benchmark's pass (setup, not synthesis): all of it is computed
    t0, c0 = time.perf_counter(), time.process_time()
    run_id, result, _ = run_synth(ctx, domain, n, seed, None, run_id)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    stages, stage_cpu = dict(result.seconds), dict(result.cpu)
    kept = max(len(result.kept), 1)
    per_task = sum(stage_cpu.get(k, 0.0) for k in ("generate", "rollout", "verify")) / kept
    payload = {"domain": domain, "blueprints": len(result.blueprints), "verified": len(result.kept),
               "seconds": total, "cpu_seconds": cpu, "verified_per_second": len(result.kept) / total,
               # counts the domain's load, as it did before the load was timed apart (then inside the design stage)
               "cpu_ms_per_verified": 1000 * (cpu + load_cpu) / kept,
               "cpu_ms_per_verified_without_domain_load": 1000 * cpu / kept,
               "item_cpu_ms_per_verified": 1000 * per_task, "stages": stages, "stage_cpu": stage_cpu,
               "domain_load_seconds": load, "domain_load_cpu_seconds": load_cpu}
    print_table(f"synthesis benchmark: {domain}, {n} blueprints, seed {seed}",
                ["stage", "seconds", "share", "CPU s", "CPU ms per verified task"],
                [[k, f"{v:.2f}", f"{v / total:.0%}", f"{stage_cpu.get(k, 0.0):.2f}",
                  f"{1000 * stage_cpu.get(k, 0.0) / kept:.2f}"] for k, v in stages.items()]
                + [["total", f"{total:.2f}", "100%", f"{cpu:.2f}", f"{1000 * cpu / kept:.2f}"],
                   ["domain load (once per process, not in the total)", f"{load:.2f}", "", f"{load_cpu:.2f}",
                    f"{1000 * load_cpu / kept:.2f}"]])
    click.echo(f"verified: {len(result.kept)} ({len(result.kept) / total:.1f} verified tasks/s; "
               f"{1000 * (cpu + load_cpu) / kept:.2f} ms CPU per verified task with the domain's load, "
               f"{1000 * cpu / kept:.2f} ms without it, {1000 * per_task:.2f} ms in generate, rollout and verify)")
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'synth-{domain}', payload, target)}")


@click.command("testsets")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--n", "n", type=FieldIntRange("RunConfig.test_size"), default=300, show_default=True)
@click.option("--output", type=PATH, default=None)
@click.pass_context
def bench_testsets(ctx, domain: str | None, n: int, output: str | None) -> None:
    """Build time (CPU and wall) of both test sets from scratch, their sizes, TV distances and marginals."""
    import time

    from evosyn.benchmarks.common import write_json
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.inputs import bench_output, writing
    from evosyn.tasks.testset import KINDS, test_cases, test_set_report, test_set_run_id
    from evosyn.tasks.testset_targets import official_cells

    env = compile_domain(domain, generator=True).env
    domain = env.name
    target = bench_output(f"testsets-{domain}", output)
    store = store_from(ctx)
    official_cells(env)  # the official replay is cached per process: timed once, apart
    payload: dict = {"domain": domain, "n": n, "sets": {}}
    rows = []
    for kind in KINDS:
        store.delete_run(test_set_run_id(env, n=n, kind=kind))  # the last benchmark's set: all of it is built
        t0, c0 = time.perf_counter(), time.process_time()
        cases = test_cases(store, env, n=n, kind=kind)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        report = test_set_report(store, env, n=n, kind=kind)
        payload["sets"][kind] = {"tasks": len(cases), "seconds": wall, "cpu_seconds": cpu, "report": report}
        tv = (f"{report['tv']:.3f} ({report['tv_realizable']:.3f} realizable)" if kind != "uniform"
              else f"num_write {report['tv_from_uniform'].get('num_write', float('nan')):.3f}")
        rows.append([kind, len(cases), report["attempts"], f"{cpu:.1f}", f"{wall:.1f}", tv])
    print_table(f"test sets: {domain}, n={n}", ["set", "tasks", "blueprints tried", "CPU s", "wall s", "TV"], rows)
    for kind in KINDS:
        show(payload["sets"][kind]["report"])
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'testsets-{domain}', payload, target)}")


@click.command("verify")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--split", default=None,
              help="The official split (default: the domain's own, e.g. tau2's base; CAR-bench's test).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N tasks with gold actions.")
@click.option("--output", type=PATH, default=None)
def bench_verify(domain: str, split: str | None, limit: int | None, output: str | None) -> None:
    """Our verifier per task (CPU and wall) against the replay floor, and against the benchmark's own evaluator
    where it is installed (tau2's)."""
    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.verify import headers, headline, rows, run
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.inputs import bench_output, writing

    env = compile_domain(domain).env
    domain, split = env.name, split or env.default_split
    if split not in env.splits():
        raise UserError(f"--split {split}: not a split of {domain}'s official tasks (known: "
                        f"{', '.join(env.splits()) or 'none'})")
    target = bench_output(f"verify-{domain}", output)
    try:
        result = run(env, split, limit)
    except ValueError as exc:
        raise UserError(f"--split {split}: {exc}") from None
    print_table(f"verify benchmark: {headline(result)}", headers(result), rows(result))
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'verify-{domain}', result, target)}")


@click.command("learner")
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--sizes", default="0,250,500,1000,2000", show_default=True)
@click.option("--test-size", type=int, default=200, show_default=True)
@click.option("--ablation-size", type=int, default=1000, show_default=True,
              help="Training-set size of the multi-write ablation (0 skips it).")
@click.option("--output", type=PATH, default=None)
@click.pass_context
def bench_learner(ctx, domain: str, sizes: str, test_size: int, ablation_size: int, output: str | None) -> None:
    """Learning curve of the embedded learner, and the multi-write ablation, on the fixed test set."""
    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.learner import multi_write_ablation, run
    from evosyn.flows.compile import compile_domain
    from evosyn.flows.inputs import bench_output, writing

    env = compile_domain(domain, generator=True).env
    domain = env.name
    target = bench_output(f"learner-{domain}", output)
    store = store_from(ctx)
    from evosyn.tasks.testset import test_cases

    cases = test_cases(store, env, n=test_size)
    if not cases:
        raise UserError(f"--test-size {test_size}: the {domain} generator built no official-matched test task "
                        "(raise --test-size)")
    result = run(store, env, [int(s) for s in sizes.split(",")], test_size, cases=cases)
    buckets = ["0", "1", "2", "3-4", "5+"]
    def per(v: float | None) -> str:
        return "" if v is None else f"{v:.1f}"

    print_table(f"embedded learner on {domain}: test-set success ({result['test_tasks']} tasks)",
                ["train size", "success", *[f"nw={b}" for b in buckets], "train s", "eval s", "train CPU s",
                 "CPU ms/trained traj", "CPU ms/evaluated task", "peak RSS MiB"],
                [[r["size"], f"{r['success']:.3f}", *[r["by_num_write"].get(b, "") for b in buckets],
                  f"{r['train_seconds']:.1f}", f"{r['eval_seconds']:.1f}", f"{r['train_cpu_seconds']:.1f}",
                  per(r["train_cpu_ms_per_trajectory"]), per(r["eval_cpu_ms_per_task"]), f"{r['peak_rss_mib']:.0f}"]
                 for r in result["curve"]])
    big = result["largest"]
    click.echo(f"training {big['size']} trajectories: {big['train_cpu_seconds']:.1f} s CPU "
               f"({per(big['train_cpu_ms_per_trajectory'])} ms each); evaluation {per(big['eval_cpu_ms_per_task'])} "
               f"ms CPU per task; peak resident memory of the benchmark's process {big['peak_rss_mib']:.0f} MiB")
    phases = big["train_cpu_by_phase"].items()
    click.echo("  its training CPU by phase: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases))
    if big["train_sgd_by_model"]:
        click.echo("  its sgd by model: " + "; ".join(
            f"{k} {m['cpu_seconds']:.1f} s ({m['rows']:,} rows, {m['nonzeros']:,} nonzeros, {m['classes']} classes)"
            for k, m in big["train_sgd_by_model"].items()))
    if ablation_size:
        result.update(multi_write_ablation(store, env, ablation_size, test_size))
        print_table(f"multi-write ablation ({ablation_size} training tasks each)",
                    ["training data", "multi-write share", "success", "success on 3+ writes",
                     *[f"nw={b}" for b in buckets]],
                    [[r["train"], f"{r['multi_write_share']:.2f}", f"{r['success']:.3f}",
                      f"{r['success_3plus_writes']:.3f} (n={r['tasks_3plus_writes']})",
                      *[r["by_num_write"].get(b, "") for b in buckets]] for r in result["ablation"]])
    with writing(target, "--output"):
        click.echo(f"wrote {write_json(f'learner-{domain}', result, target)}")
