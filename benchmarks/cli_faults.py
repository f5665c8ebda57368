"""`evosyn bench faults`: kill-and-resume at every stage boundary, fuzzed replies, faulty and absent LLM servers,
concurrent first use of a store, a search for the API key in everything the runs wrote, and the store's and the
client's rows: kills and a full disk inside the first-time initialisations, random kills of the main PID only,
damaged chunks, a hostile LLM server; and the second audit's (benchmarks/faults_audit.py): hostile inputs, user
SQL, broken packs, a damaged test set and unvouched files, documented commands on every built-in domain."""
from __future__ import annotations

import click

from evosyn.flows.cli_app import UserError
from evosyn.flows.render import print_table

AREAS = ("kill", "fuzz", "llm", "concurrent", "init", "random", "damage", "hostile", "inputs", "query", "packs",
         "store", "domains")


@click.command("faults")
@click.option("--only", multiple=True, type=click.Choice(AREAS), help="Run only these areas (repeatable).")
@click.option("--fuzz-replies", type=click.IntRange(1), default=3000, show_default=True)
@click.option("--trials", type=click.IntRange(1, 1000), default=20, show_default=True,
              help="Random kills of the main PID (area random).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the runs' stores here (default: a temporary folder, removed afterwards).")
@click.option("--output", type=click.Path(dir_okay=False), default=None)
def bench_faults(only: tuple[str, ...], fuzz_replies: int, trials: int, workdir: str | None,
                 output: str | None) -> None:
    """Kill and resume, fuzzed and hostile replies, damaged stores, key leaks; exit 1 if a row fails."""
    from pathlib import Path

    from evosyn.benchmarks.common import write_json
    from evosyn.benchmarks.faults import run
    from evosyn.flows.inputs import bench_output, check_output, writing

    out = bench_output("faults", output)
    if workdir:
        check_output(workdir, "--workdir", kind="dir")
    if not only or "fuzz" in only:
        try:
            import hypothesis  # noqa: F401
        except ImportError:
            raise UserError("bench faults: the fuzzed replies need hypothesis; pip install -e '.[dev]' "
                            "(or pick other areas: --only kill --only init ...)") from None

    from evosyn.benchmarks.faults_audit import checks as audit_checks
    from evosyn.benchmarks.faults_store import checks as store_checks

    result = run(Path(workdir) if workdir else None, fuzz_n=fuzz_replies, only=set(only) or None,
                 also=lambda b, want: store_checks(b, want, trials) + audit_checks(b, want),
                 say=lambda s: click.echo(s, err=True))
    print_table("fault benchmark", ["area", "check", "result", "detail", "seconds"],
                [[c["area"], c["check"], "PASS" if c["passed"] else "FAIL", c["detail"], f"{c['seconds']:.0f}"]
                 for c in result["checks"]])
    failed = sum(not c["passed"] for c in result["checks"])
    click.echo(f"{'PASS' if result['passed'] else 'FAIL'}: {len(result['checks']) - failed} of "
               f"{len(result['checks'])} rows pass ({result['seconds']:.0f}s)")
    with writing(out, "--output"):
        # a partial run names its areas (faults-init-random): RESULTS.md lists it beside the full one
        name = "-".join(["faults", *only]) if only else "faults"
        click.echo(f"wrote {write_json(name, result, out)}")
    if not result["passed"]:
        raise SystemExit(1)
