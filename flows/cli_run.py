"""`evosyn run`, `evosyn report` and `evosyn compare` (`evosyn sweep`: flows/cli_sweep.py)."""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager

import click

from evosyn.flows.cli_app import PATH, UserError, main
from evosyn.flows.cli_fields import FieldChoice, FieldIntRange
from evosyn.flows.inputs import store_from
from evosyn.flows.outages import NotLoggedTwice, again, service_down
from evosyn.flows.render import print_table


class RunFailed(UserError):
    """The run started and could not go on (e.g. its LLM server is down): one line, exit code 1."""

    exit_code = 1


def _config(ctx, config_file, **overrides):
    from evosyn.config import ConfigError, load_config

    try:
        cfg = load_config(config_file, overrides={k: v for k, v in overrides.items() if v is not None})
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    if ctx.obj.get("home") and not cfg.store.root:
        cfg.store.root = ctx.obj["home"]
    return compiled(cfg)


def compiled(cfg):
    """``cfg`` through the compile step (``evosyn.flows.compile.compile_run``): each failed check one line."""
    from evosyn.agents.learners.llamafactory import TrainingError
    from evosyn.flows.compile import compile_run
    from evosyn.flows.task_runners import TaskRunnerMissing
    from evosyn.storage.userfiles import ConfigError

    try:
        return compile_run(cfg)
    except (ConfigError, TrainingError, TaskRunnerMissing) as exc:
        raise UserError(str(exc)) from None


def prefect_api(root, meanwhile=None) -> str:
    """Settle the Prefect API once, after every input check and before the first flow (flows/prefect_api.py);
    ``meanwhile`` (the command's imports) overlaps a temporary server's start."""
    from evosyn.tasks import timing
    from evosyn.flows.prefect_api import PrefectApiError, ensure_prefect_api
    from evosyn.storage.outages import OutageSettingError

    # Prefect's log handler writes "--- Error logging to API ---" and the error to stderr for each batch of logs it
    # cannot send (it follows the stdlib's switch): an API that went away is said once, by the command's one line
    logging.raiseExceptions = False
    try:
        with timing.span("startup", "prefect api"):
            return ensure_prefect_api(root, meanwhile=meanwhile)
    except (PrefectApiError, OutageSettingError) as exc:
        raise UserError(str(exc)) from None


def import_run_flow() -> None:
    import evosyn.flows.run  # noqa: F401 - Prefect's engine, the stages, the learner: seconds of imports


@contextmanager
def services_down(location, run_id: str | None = None, tracking_uri: str | None = None):
    """A service that stopped answering (after its retries: storage/outages.py) is one line, exit 1."""
    try:
        yield
    except Exception as exc:
        line = service_down(exc, location, tracking_uri)
        if line is None:
            raise
        raise RunFailed(f"{line}; {again(run_id)}") from None


@contextmanager
def reported_in_one_line(location=None, run_id: str | None = None, tracking_uri: str | None = None):
    """The errors a started run reports as one line (Prefect's traceback of them is not logged).

    A server that cannot be used and a run id already running elsewhere are run failures (exit 1: the run
    is marked failed, a ``--resume`` continues it); a test set that cannot be built is an input error (exit 2).
    A service (the object store of the store at ``location``, the Prefect API, the MLflow server) that stopped
    answering is a run failure: ``run_id`` resumes it.
    """
    from evosyn.agents.learners.llamafactory import TrainingError
    from evosyn.agents.roles import StageUnavailable
    from evosyn.flows.run import RunBusy, TestSetError
    from evosyn.storage.locks import StoreLockTimeout

    reported = (StageUnavailable, TestSetError, RunBusy, StoreLockTimeout, TrainingError)
    quiet = NotLoggedTwice(reported, lambda exc: service_down(exc, location or "", tracking_uri))
    for handler in logging.getLogger().handlers:  # Prefect's console handler
        handler.addFilter(quiet)
    try:
        with services_down(location or "", run_id, tracking_uri):
            yield
    except (StageUnavailable, RunBusy, StoreLockTimeout, TrainingError) as exc:  # TrainingError: its training,
        # its server or its deployment failed (the log it names says why)
        raise RunFailed(str(exc)) from None
    except TestSetError as exc:
        raise UserError(str(exc)) from None
    except Exception as exc:  # a store fault (an unreadable chunk, a full disk) is one line too, never a traceback
        from evosyn.storage.store import as_store_fault

        fault = as_store_fault(exc)
        if fault is None and quiet.down is not None:  # the error of a task the outage left unrun: the outage's line
            raise RunFailed(f"{quiet.down}; {again(run_id)}") from None
        if fault is None:
            raise
        raise RunFailed(str(fault)) from None
    finally:
        for handler in logging.getLogger().handlers:
            handler.removeFilter(quiet)


def _lock_run(cfg, resume: str | None):
    """The run's lock (flows/run_id.py), taken here, before Prefect's start; the flow re-enters it."""
    from evosyn.flows.run_id import RunBusy, run_id_for, run_lock

    try:
        return run_lock(cfg.store_location(), resume or run_id_for(cfg))
    except RunBusy as exc:
        raise RunFailed(str(exc)) from None


def _forget_root(root, existed: bool) -> None:
    """A command that failed before its run began writes nothing: a root it made for its lock alone goes again."""
    import shutil

    try:
        if not existed and {p.name for p in root.iterdir()} <= {"locks"}:
            shutil.rmtree(root)
    except OSError:  # gone already, or not ours to judge
        pass


def print_summary(summary) -> None:
    """The run's rounds; a domain with no official-matched set shows its uniform score as the test score, marked
    ``(uniform)``; ``test overlap``: the share of the training tasks that copy a test-set task (tasks/overlap.py),
    with a warning line under the table above its threshold."""
    from evosyn.tasks.overlap import overlap_warnings, scored_set, test_score

    def test(r: dict) -> str:
        value = test_score(r)[1]
        return f"{value:.3f}" + ("" if scored_set(r) == "test" else " (uniform)")

    def share(v) -> str:
        return "-" if v is None else f"{v:.0%}"

    print_table(f"run {summary.run_id} ({summary.seconds:.0f}s)",
                ["round", "verified yield", "diagnostic success", "test success", "uniform test success",
                 "test overlap", "factor cov", "balance", "interaction cov", "traj diversity", "space diff"],
                [[r["round"], f"{r['verified_yield']:.2f}", f"{r['success_diagnostic']:.3f}",
                  test(r), f"{r.get('success_test_uniform', float('nan')):.3f}", share(r.get("overlap_test_sets")),
                  f"{r['factor_coverage']:.3f}", f"{r['factor_balance']:.3f}",
                  f"{r['interaction_coverage']:.3f}", f"{r['trajectory_diversity']:.3f}", r["diff"]]
                 for r in summary.rounds])
    for line in overlap_warnings(summary.rounds[-1]) if summary.rounds else []:
        click.echo(line)


def print_next(run_id: str, root) -> None:
    """Where the run's rows are, and the commands that read them, with the run id filled in."""
    import os
    from pathlib import Path

    from evosyn.storage.objectstore import is_remote

    if is_remote(root):  # an s3:// store: its name as given
        home = "" if root == os.environ.get("EVOSYN_HOME") else f"--home {root} "
    else:
        root = Path(root).resolve()
        default = Path(os.environ.get("EVOSYN_HOME") or ".evosyn").expanduser().resolve()
        home = "" if root == default else f"--home {root} "
    click.echo(f"store: {root}\nnext:\n"
               f"  evosyn {home}report {run_id}\n"
               f"  evosyn {home}export --run {run_id} --format sharegpt --output export-{run_id}\n"
               f"  evosyn {home}query \"select round, task_set, avg(success::int) as success from evaluations "
               f"where run_id = '{run_id}' group by all order by 1, 2\"")
    from evosyn.flows.examples import stored_show_line
    from evosyn.storage.store import Store

    if (line := stored_show_line(Store(str(root), create=False), run_id, home)) is not None:
        click.echo(line)  # one id of the run's to look at, without writing SQL first


QUIET = click.option("--quiet", is_flag=True, help="One plain line per finished stage, no live display "
                                                   "(also when stderr is not a terminal).")


@main.command()
@click.option("--domain", default=None)
@click.option("--rounds", type=FieldIntRange("RunConfig.rounds"), default=None)
@click.option("--arm", type=FieldChoice("RunConfig.arm"), default=None)
@click.option("--budget", type=FieldIntRange("RunConfig.budget"), default=None, help="Blueprints per round.")
@click.option("--seed", type=int, default=None)
@click.option("--backend", type=FieldChoice("RunConfig.backend"), default=None)
@click.option("--learner", type=FieldChoice("RunConfig.learner"), default=None,
              help="The task agent trained each round (llamafactory: the config's `llamafactory` section).")
@click.option("--config", "config_file", type=PATH, default=None)
@click.option("--resume", "resume", default=None, help="Continue this run id (its stored config is used).")
@click.option("--reuse", is_flag=True, help="After an edit of your pack: continue the run made before the edit "
                                            "(a run id covers the pack's code, so a rerun is a new run).")
@QUIET
@click.pass_context
def run(ctx, domain, rounds, arm, budget, seed, backend, learner, config_file, resume, reuse, quiet) -> None:
    """Run the closed loop: rounds of design, plan, generate, rollout, verify, dedup, train, evaluate, reflect."""
    import json

    from evosyn.flows.inputs import check_store_root
    from evosyn.config import validate_config

    if resume:
        store = store_from(ctx, create=False, runs=(resume,), option="--resume")
        stored = store.read_records("runs", run_id=resume)
        if not stored:
            raise UserError(f"--resume {resume}: the run has no stored config in {store.root} (start it again "
                            "with --config)")
        cfg = validate_config(json.loads(stored[0].config_json), source=f"stored config of {resume}")
        cfg.store.root = store.location
        run = compiled(cfg)
    else:
        run = _config(ctx, config_file, domain=domain, rounds=rounds, arm=arm, budget=budget, seed=seed,
                      backend=backend, learner=learner)
    cfg = run.cfg
    check_store_root(cfg.store_root())
    existed = cfg.store_root().exists()
    from evosyn.flows.pack_reruns import run_rerun

    if reuse and resume:
        raise UserError(f"--reuse: --resume {resume} continues the run it names; drop --reuse")
    with services_down(cfg.store_location(), resume):  # a user's pack: its code version is part of the id
        rerun = None if resume else run_rerun(cfg, reuse)
    run_id = resume or rerun.run_id
    with services_down(cfg.store_location(), run_id):
        busy = _lock_run(cfg, run_id)  # before the slow start-up: a run already running is said at once
    stopped: tuple = (None, None, None)
    try:
        prefect_api(cfg.store_root(), meanwhile=import_run_flow)
        if rerun is not None:
            rerun.begin(cfg.store_location())  # a change of the pack since its last run: one line
        from evosyn.tasks import timing
        from evosyn.flows.progress import renderer
        from evosyn.flows.run import evosyn_run

        with reported_in_one_line(cfg.store_location(), run_id, cfg.store.tracking_uri), renderer(quiet) as show, \
                timing.span("flow", "run"):
            summary = evosyn_run(cfg, run_id=run_id, progress=show, compiled=run)
    except BaseException:
        stopped = sys.exc_info()  # the lock's release is told why (a store that does not answer: the lease lapses)
        raise
    finally:
        with services_down(cfg.store_location(), run_id):  # the release of a lease on a store that went away
            busy.__exit__(*stopped)
        _forget_root(cfg.store_root(), existed)
    print_summary(summary)
    print_next(summary.run_id, cfg.store_location())


@main.command()
@click.argument("run_id")
@click.option("--compare", multiple=True, help="Other run ids to put side by side.")
@click.option("--output", type=PATH, default=None, help="Default: <root>/reports/<run>.")
@click.pass_context
def report(ctx, run_id: str, compare: tuple[str, ...], output: str | None) -> None:
    """A self-contained HTML report (success over rounds, slices, allocation, probes, evolution trace, sample
    chats, legend) and a Markdown summary of a run."""
    from evosyn.flows.compile import stored_domain
    from evosyn.flows.inputs import check_output, writing
    from evosyn.tasks.reports.data import report_domains
    from evosyn.tasks.reports.report import write_report

    store = store_from(ctx, create=False, runs=(run_id, *compare))
    out = check_output(output or store.root / "reports" / run_id, "--output", kind="dir")
    envs = {d: stored_domain(d) for d in report_domains(store, [run_id, *compare])}
    with writing(out, "--output"):
        page, md = write_report(store, run_id, list(compare), out, envs)
    click.echo(f"wrote {page}\nwrote {md}")


def print_compare(result: dict) -> None:
    """Two tables per view (the learner's metrics, the verified data's), so every heading fits unabridged."""
    from evosyn.tasks.reports.compare import DATA_COLUMNS, KEY_COLUMNS, LEARNER_COLUMNS, _cell, legend_lines
    from evosyn.tasks.reports.legend import label

    union = ", ".join(f"{d} {len(u)}" for d, u in result["pattern_union"].items())
    matched = ", ".join(f"{d} {n}" for d, n in result["size_matched_n"].items())
    for what, cols in (("learner", LEARNER_COLUMNS), ("verified data", DATA_COLUMNS)):
        print_table(f"runs x rounds: {what} (pattern union: {union}; size-matched N: {matched})",
                    [label(c) for c in (*KEY_COLUMNS, *cols)],
                    [[_cell(r[c]) for c in (*KEY_COLUMNS, *cols)] for r in result["rows"]])
    for what, cols in (("learner", LEARNER_COLUMNS), ("verified data", [c for c in DATA_COLUMNS if c != "verified"])):
        print_table(f"final round, mean over seeds: {what}", ["domain", "arm", "runs", *(label(c) for c in cols)],
                    [[m["domain"], m["arm"], m["runs"], *(_cell(m[c]) for c in cols)] for m in result["arm_means"]])
    for domain in result.get("uniform_scored", []):
        click.echo(f"{domain}: no official tasks: its test score is the uniform test set's (test (uniform))")
    for line in result.get("warnings", []):
        click.echo(line)
    click.echo("legend (- in a cell: undefined there, e.g. a transition metric in round 1):")
    for line in legend_lines(result):
        click.echo(f"  {line}")


@main.command()
@click.argument("run_ids", nargs=-1, required=True)
@click.option("--output", type=PATH, default=None,
              help="Where compare.json and compare.md go (default: <root>/reports/compare-<first run>).")
@click.pass_context
def compare(ctx, run_ids: tuple[str, ...], output: str | None) -> None:
    """One table of every run (arm, seed) x round on shared normalizations, plus per-arm final means."""
    from evosyn.flows.compile import stored_domain
    from evosyn.flows.inputs import check_output, writing
    from evosyn.tasks.reports.compare import compare as compare_runs
    from evosyn.tasks.reports.compare import write_compare
    from evosyn.tasks.reports.data import domain_of

    store = store_from(ctx, create=False, runs=run_ids)
    out = check_output(output or store.root / "reports" / f"compare-{run_ids[0]}", "--output", kind="dir")
    ids = list(dict.fromkeys(run_ids))
    # the runs span domains: each distinct one resolved once
    result = compare_runs(store, ids, {d: stored_domain(d) for d in {domain_of(store, rid) for rid in ids}})
    print_compare(result)
    if result["stale_runs"]:
        click.echo(f"warning: rerun {', '.join(result['stale_runs'])}: stored before the observed "
                   "tool_use_pattern existed, so their tool-pattern metrics are understated", err=True)
    with writing(out, "--output"):
        js, md = write_compare(result, out)
    click.echo(f"wrote {js}\nwrote {md}")
