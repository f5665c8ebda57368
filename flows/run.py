"""The EvoSyn run: rounds of `round_flow` with the stop rules, tracked in MLflow (§4.2, App. B.1).

``progress`` gets the run's messages (``str``) and, while the run lasts, every
``StageEvent`` its rounds publish in this process (``evosyn.flows.progress``): the CLI
passes a renderer. The run publishes a summary artifact to its flow run.

Stop rules: at most ``rounds`` rounds; for arms whose Reflector may revise the
space, stop after ``stop_after_static_rounds`` consecutive rounds without a
space update (0: never, so every arm of a comparison runs the same rounds and
budget; `evosyn bench learning` runs every arm so). What else differs per arm:
``tasks/loop.py``. Rerunning a run id resumes it: finished stages are read back
from the store, missing ones are computed.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prefect import flow

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.flows.artifacts import publish_summary
from evosyn.flows.compile import CompiledRun, compile_run
from evosyn.flows.round import round_flow
from evosyn.flows.run_id import RunBusy, run_id_for, run_lock  # noqa: F401 (RunBusy, run_id_for: their home before)
from evosyn.flows.task_runners import task_runner_for
from evosyn.storage import atomic
from evosyn.config import RunConfig
from evosyn.storage.objectstore import unreachable
from evosyn.storage.records import Run
from evosyn.storage.store import Store, as_store_fault
from evosyn.storage.tracking import Tracker, server_down_line
from evosyn.tasks import timing
from evosyn.tasks.engine import listening
from evosyn.tasks.loop import REFLECTING_ARMS
from evosyn.tasks.overlap import overlap_warnings, score_line, scored_metrics
from evosyn.tasks.progress import StageEvent
from evosyn.tasks.stages import steering_for

log = logging.getLogger("evosyn.run")


@dataclass
class RunSummary:
    run_id: str
    rounds: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def stops(cfg: RunConfig, unchanged: int) -> bool:
    """The early stop rule after a round: an arm whose Reflector may revise the space, ``unchanged`` consecutive
    rounds without an update, and a rule that is on (``stop_after_static_rounds`` 0 never stops)."""
    n = cfg.stop_after_static_rounds
    return cfg.arm in REFLECTING_ARMS and n > 0 and unchanged >= n


def _check_test_set(store: Store, run: CompiledRun, say: Callable[[str], None]) -> None:
    """The fixed test sets (official-matched, uniform), built (once) before any round, so a set the generator
    cannot fill is known now; each set's report line (what it aimed at, what it realized) is said."""
    from evosyn.tasks.testset import KINDS, report_line, test_cases, test_set_report

    cfg, env = run.cfg, run.env
    for kind in KINDS:
        if kind in run.skipped:  # no official tasks: nothing to match
            say(run.skipped[kind])
            continue
        cases = test_cases(store, env, n=cfg.test_size, kind=kind)
        if not cases:
            raise TestSetError(f"test_size: the {cfg.domain} generator built no {kind} test task for a set of "
                               f"{cfg.test_size} (raise test_size)")
        say(report_line(test_set_report(store, env, n=cfg.test_size, kind=kind)))
        if len(cases) < cfg.test_size:
            say(f"test set {kind}: {len(cases)} tasks; the {cfg.domain} generator could not build "
                f"{cfg.test_size - len(cases)} of the {cfg.test_size} (test_size)")


class TestSetError(ValueError):
    """The configured test set cannot be built (one line, naming the field)."""


def _mark_failed(cfg: RunConfig, run_id: str, exc: BaseException) -> None:
    """A run stopped by an error is failed, in ``runs`` and in MLflow (a ``--resume`` may still finish it); not in
    an MLflow server that ``exc`` says stopped answering (its retries would only delay the run's one line)."""
    store = Store(cfg.store_location())
    if not store.has_chunk("runs", run_id, 0, "run"):
        return  # it failed before it began: nothing was recorded
    run = store.read_records("runs", run_id=run_id, round=0)[0]
    store.write([run.model_copy(update={"status": "failed"})], "run")
    uri = cfg.store.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "")
    if server_down_line(uri, exc) is not None:
        return
    tracker = Tracker(store.root, cfg.store.tracking_uri, store=store.where())
    tracker.finish(tracker.start_run(run), status="FAILED")


def _log_fallbacks(store: Store, tracker: Tracker, child: str, run_id: str, round: int,
                   say: Callable[[str], None]) -> None:
    """No silent fallback: a round whose LLM role went on without a usable reply says so on the terminal and in
    MLflow (the ``llm_fallbacks`` metric and an ``evosyn.warning`` tag on the round run)."""
    rows = store.read_fields("llm_calls", ["role", "status"], run_id=run_id, round=round)
    if not rows:  # no LLM role: nothing to count
        return
    roles = sorted({r["role"] for r in rows if r["status"] == "fallback"})
    tracker.log_metrics(child, {"llm_fallbacks": sum(r["status"] == "fallback" for r in rows)}, step=round)
    if roles:
        note = f"round {round}: {', '.join(roles)} fell back (LLM replies stayed invalid; on_invalid: fallback)"
        tracker.client.set_tag(child, "evosyn.warning", note)
        say(f"warning: {note}")


def _finished(cfg: RunConfig, run_id: str) -> bool:
    try:
        rows = Store(cfg.store_location(), create=False).read_records("runs", run_id=run_id, round=0)
    except Exception:  # an unreadable row: the run reads as not finished, and its own error says why
        return False
    return bool(rows) and rows[-1].status == "finished"


def _restore_finished(cfg: RunConfig, run_id: str) -> None:
    try:
        store = Store(cfg.store_location(), create=False)
        run = store.read_records("runs", run_id=run_id, round=0)[0]
        if run.status != "finished":
            store.write([run.model_copy(update={"status": "finished"})], "run")
        tracker = Tracker(store.root, cfg.store.tracking_uri, store=store.where())
        tracker.finish(tracker.start_run(run))
    except Exception as exc:
        log.debug("could not keep run %s finished: %s", run_id, exc)


@flow(name="evosyn-run")
def evosyn_run(cfg: RunConfig, run_id: str | None = None,
               progress: Callable[[str | StageEvent], None] | None = None, compiled: Any = None) -> RunSummary:
    """``compiled``: ``cfg`` as ``evosyn.flows.compile.compile_run`` resolved it (the CLI compiles before its
    slow start-up); None compiles it here (a deployment's flow run, a sweep's cell)."""
    if compiled is not None:
        cfg = compiled.cfg  # its domain filled in
    elif not cfg.domain:  # "" is the default domain pack (storage cannot name it)
        from evosyn.envs.packs import default_domain

        cfg = cfg.model_copy(update={"domain": default_domain()})
    run_id = run_id or run_id_for(cfg)
    busy = run_lock(cfg.store_location(), run_id)  # re-entered when the CLI took it before its slow start-up
    finished = _finished(cfg, run_id)
    stopped: tuple = (None, None, None)
    try:
        with listening(run_id, progress), timing.span("body", "run"):
            return _run(cfg, run_id, progress, compiled)
    except BaseException as exc:  # an error, and also Ctrl-C: the run did not finish
        stopped = sys.exc_info()  # the lock's release is told why (an object store that stopped answering: the lease
        # lapses, storage/leases.py)
        if unreachable(exc) is not None:
            # nothing can be marked on a store that does not answer: the run stays `running`, and --resume goes on
            # from its last finished stage once the store is back
            raise
        if finished and as_store_fault(exc) is not None:
            # a finished run's rows stand: a store fault met by a later --resume (a chunk it could not read back)
            # leaves it finished, in `runs` and MLflow, with the fault reported in one line
            _restore_finished(cfg, run_id)
            raise
        try:
            _mark_failed(cfg, run_id, exc)
        except Exception as err:  # recording the failure must never hide what made the run fail
            # the same fault (or the same store gone), said once
            level = logging.DEBUG if as_store_fault(err) is not None or unreachable(err) is not None \
                else logging.WARNING
            log.log(level, "could not mark run %s failed: %s: %s", run_id, type(err).__name__, err)
        raise
    finally:
        busy.__exit__(*stopped)


def _run(cfg: RunConfig, run_id: str, progress: Callable[[str | StageEvent], None] | None = None,
         compiled: CompiledRun | None = None) -> RunSummary:
    t0 = time.perf_counter()
    say = progress or (lambda s: None)
    compiled = compiled if compiled is not None else compile_run(cfg)  # every check, before any work
    store = Store(cfg.store_location())
    run_id = run_id or run_id_for(cfg)
    run = Run(run_id=run_id, round=0, domain=cfg.domain, arm=cfg.arm, backend=cfg.backend, seed=cfg.seed,
              rounds=cfg.rounds, budget=cfg.budget, config_json=cfg.stored_json())
    prior = store.read_records("runs", run_id=run_id)
    if prior:  # a resume keeps the stored row (its created_at), so finishing it twice writes the same row
        run = prior[0].model_copy(update={"status": "running"})
    if not prior or prior[0].status != "running":
        store.write([run], "run")
    tracker = Tracker(store.root, cfg.store.tracking_uri, store=store.where())
    parent = tracker.start_run(run)
    space = load_initial_space(compiled.pack, run_id=run_id, extra=cfg.initial_factors)
    if not store.has_chunk("spaces", run_id, 0, "initial"):
        store.write([space], "initial")
    tracker.log_space(parent, space)  # a no-op once logged
    with timing.span("own", "test set"):
        _check_test_set(store, compiled, say)
    steering, previous, unchanged = ColdStart(), None, 0
    summary = RunSummary(run_id)
    for r in range(1, cfg.rounds + 1):
        say(f"round {r}/{cfg.rounds}: design, plan, generate, rollout, verify, dedup, train, evaluate, reflect")
        with timing.span("flow", "round", r):
            res = round_flow.with_options(task_runner=task_runner_for(cfg))(cfg, run_id, r, space, steering,
                                                                            previous)
        child = tracker.start_round(parent, run_id, r)
        metrics = res.metrics
        if not tracker.is_logged(child):  # a resume logs only the rounds (or their parts) not logged yet
            tracker.log_metrics(child, metrics, step=r)
            tracker.log_metrics(parent, {k: v for k, v in metrics.items() if "." not in k}, step=r)
            evaluated_by = next((e.model_version for e in [*res.diagnostic, *res.test]), "")
            tracker.log_params(child, {"space_version_in": res.space_in.version, "steering": steering.kind,
                                       "learner": cfg.learner, "model_version": evaluated_by,
                                       # which set success_test_scored is (the uniform one: no official tasks)
                                       "test_set_scored": scored_metrics(metrics)["test_set_scored"],
                                       # an official score names its task set (package and version, or folder)
                                       **({"official_tasks": res.official.task_source.label} if res.official
                                          else {})})
            tracker.log_space(child, res.space_out)
            if res.reflection is not None:
                tracker.log_reflection(child, res.reflection)
            tracker.log_json(child, "directions.json", [d.model_dump(mode="json") for d in res.directions])
            _log_fallbacks(store, tracker, child, run_id, r, say)
            tracker.finish(child)
            tracker.mark_logged(child)
        diff = "; ".join(f"{c.kind} {c.factor}" for c in res.space_out.diff) if res.space_out.version > \
            res.space_in.version else "no change"
        summary.rounds.append({"round": r, **metrics, "diff": diff})
        say(f"round {r}: verified {res.verified}/{res.blueprints}, diagnostic "
            f"{metrics['success_diagnostic']:.3f}, {score_line(metrics)}, dedup: {res.dedup.flagged}/"
            f"{res.dedup.checked} flagged, space: {diff}")
        for line in overlap_warnings(metrics, f"round {r}: "):  # copies of test tasks in training: said, not hidden
            say(line)
        steering = steering_for(cfg.arm, res.reflection, res.feedback)
        unchanged = unchanged + 1 if res.space_out.version == res.space_in.version else 0
        space, previous = res.space_out, res.feedback
        if stops(cfg, unchanged):
            say(f"stopping: {unchanged} rounds without a space update")
            break
    store.write([run.model_copy(update={"status": "finished"})], "run")
    tracker.finish(parent)
    summary.seconds = time.perf_counter() - t0
    atomic.write_json(store.root / f"summary-{run_id}.json",
                      {"run_id": run_id, "rounds": summary.rounds, "seconds": summary.seconds}, indent=2)
    publish_summary(run_id, summary.rounds, summary.seconds, str(store.root))
    return summary
