"""The EvoSyn run: rounds of `round_flow` with the stop rules, tracked in MLflow (§4.2, App. B.1).

``progress`` gets the run's messages (``str``) and, while the run lasts, every
``StageEvent`` its rounds publish in this process (``flows.progress``): the CLI
passes a renderer. The run publishes a summary artifact to its flow run.

Stop rules: at most ``rounds`` rounds; for arms whose Reflector may revise the
space, stop after ``stop_after_static_rounds`` consecutive rounds without a
space update (0: never, so every arm of a comparison runs the same rounds and
budget; `evosyn bench learning` runs every arm so). What else differs per arm:
``tasks/loop.py``. Rerunning a run id resumes it: finished stages are read back
from the store, missing ones are computed.
"""
from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prefect import flow

from agents.designer import ColdStart
from agents.roles import check_roles
from envs.ontology import check_initial_factors, load_initial_space
from envs.properties import check_prior
from flows.artifacts import publish_summary
from flows.round import round_flow
from storage import atomic
from storage.config import RunConfig
from storage.locks import StoreLockTimeout, store_lock
from storage.records import Run
from storage.store import Store
from storage.tracking import Tracker
from tasks import timing
from tasks.engine import listening
from tasks.loop import REFLECTING_ARMS
from tasks.official_agents import check_official_config
from tasks.progress import StageEvent
from tasks.stages import steering_for

log = logging.getLogger("evosyn.run")


def run_id_for(cfg: RunConfig) -> str:
    # where it trains and what it also measures (official_eval) change no row the run synthesizes or learns;
    # the llamafactory section only matters to a run that uses it (ids of embedded runs stay as they were)
    exclude: dict = {k: True for k in ("store", "train_deployment", "official_eval")}
    if cfg.learner == "embedded":
        exclude["llamafactory"] = True
    if cfg.prior.is_default():  # the default prior: ids of runs without a planted gap stay as they were
        exclude["prior"] = True
    elif cfg.prior.writes is None:  # nor do those of planted gaps on the default write counts
        exclude["prior"] = {"writes": True}
    if not cfg.initial_factors:  # the pack's initial space: ids stay as they were
        exclude["initial_factors"] = True
    digest = hashlib.sha256(cfg.model_dump_json(exclude=exclude).encode()).hexdigest()[:6]
    return f"{cfg.domain}-{cfg.arm}-s{cfg.seed}-{digest}"


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


def _check_test_set(store: Store, cfg: RunConfig, say: Callable[[str], None]) -> None:
    """The fixed test sets (official-matched, uniform), built (once) before any round, so a set the generator
    cannot fill is known now; each set's report line (what it aimed at, what it realized) is said."""
    from tasks.testset import KINDS, report_line, skipped_line, test_cases, test_set_report

    for kind in KINDS:
        if (skipped := skipped_line(cfg.domain, kind)) is not None:  # no official tasks: nothing to match
            say(skipped)
            continue
        cases = test_cases(store, cfg.domain, n=cfg.test_size, kind=kind)
        if not cases:
            raise TestSetError(f"test_size: the {cfg.domain} generator built no {kind} test task for a set of "
                               f"{cfg.test_size} (raise test_size)")
        say(report_line(test_set_report(store, cfg.domain, n=cfg.test_size, kind=kind)))
        if len(cases) < cfg.test_size:
            say(f"test set {kind}: {len(cases)} tasks; the {cfg.domain} generator could not build "
                f"{cfg.test_size - len(cases)} of the {cfg.test_size} (test_size)")


class RunBusy(RuntimeError):
    """The same run id is already running in another process on this store."""


class TestSetError(ValueError):
    """The configured test set cannot be built (one line, naming the field)."""


def _mark_failed(cfg: RunConfig, run_id: str) -> None:
    """A run stopped by an error is failed, in ``runs`` and in MLflow (a ``--resume`` may still finish it)."""
    store = Store(cfg.store_root())
    if not store.has_chunk("runs", run_id, 0, "run"):
        return  # it failed before it began: nothing was recorded
    run = store.read_records("runs", run_id=run_id, round=0)[0]
    store.write([run.model_copy(update={"status": "failed"})], "run")
    tracker = Tracker(store.root, cfg.store.tracking_uri)
    tracker.finish(tracker.start_run(run), status="FAILED")


@flow(name="evosyn-run")
def evosyn_run(cfg: RunConfig, run_id: str | None = None,
               progress: Callable[[str | StageEvent], None] | None = None) -> RunSummary:
    if not cfg.domain:  # "" is the default domain pack (storage cannot name it)
        from envs.packs import default_domain

        cfg = cfg.model_copy(update={"domain": default_domain()})
    run_id = run_id or run_id_for(cfg)
    # one process per run id: a second `run` of the same config (or a second --resume) would redo the same
    # stages beside the first and pay for the same LLM calls twice
    busy = store_lock(cfg.store_root(), f"run-{run_id}", timeout=0)
    try:
        busy.__enter__()
    except StoreLockTimeout:
        raise RunBusy(f"run {run_id} is already running in another process on {cfg.store_root()} (wait for it, "
                      "or stop it and --resume)") from None
    try:
        with listening(run_id, progress), timing.span("body", "run"):
            return _run(cfg, run_id, progress)
    except BaseException:  # an error, and also Ctrl-C: the run did not finish
        try:
            _mark_failed(cfg, run_id)
        except Exception as exc:  # recording the failure must never hide what made the run fail
            log.warning("could not mark run %s failed: %s: %s", run_id, type(exc).__name__, exc)
        raise
    finally:
        busy.__exit__(None, None, None)


def _run(cfg: RunConfig, run_id: str | None = None, progress: Callable[[str | StageEvent], None] | None = None
         ) -> RunSummary:
    t0 = time.perf_counter()
    say = progress or (lambda s: None)
    if cfg.backend == "llm" or any(rc.backend == "llm" for rc in cfg.roles.values()):
        check_roles(cfg)  # every LLM role's provider, model and key, before any work (the rounds use llm_roles(cfg))
    check_prior(cfg.prior.suppress, cfg.domain)  # a planted gap names what the generator controls
    check_initial_factors(cfg.initial_factors, cfg.domain)  # and so do the factors the initial space adds
    if cfg.official_eval is not None:
        check_official_config(cfg.official_eval, cfg.domain)  # its split and its LLM user, before any work
    if cfg.learner == "llamafactory":
        from agents.learners.llamafactory import check_learner

        check_learner(cfg.llamafactory, cfg.train_deployment)  # its CLI, and a GPU where the recipe needs one
    store = Store(cfg.store_root())
    run_id = run_id or run_id_for(cfg)
    run = Run(run_id=run_id, round=0, domain=cfg.domain, arm=cfg.arm, backend=cfg.backend, seed=cfg.seed,
              rounds=cfg.rounds, budget=cfg.budget, config_json=cfg.model_dump_json())
    prior = store.read_records("runs", run_id=run_id)
    if prior:  # a resume keeps the stored row (its created_at), so finishing it twice writes the same row
        run = prior[0].model_copy(update={"status": "running"})
    if not prior or prior[0].status != "running":
        store.write([run], "run")
    tracker = Tracker(store.root, cfg.store.tracking_uri)
    parent = tracker.start_run(run)
    space = load_initial_space(cfg.domain, run_id=run_id, extra=cfg.initial_factors)
    if not store.has_chunk("spaces", run_id, 0, "initial"):
        store.write([space], "initial")
    tracker.log_space(parent, space)  # a no-op once logged
    with timing.span("own", "test set"):
        _check_test_set(store, cfg, say)
    steering, previous, unchanged = ColdStart(), None, 0
    summary = RunSummary(run_id)
    for r in range(1, cfg.rounds + 1):
        say(f"round {r}/{cfg.rounds}: design, plan, generate, rollout, verify, train, evaluate, reflect")
        with timing.span("flow", "round", r):
            res = round_flow(cfg, run_id, r, space, steering, previous)
        child = tracker.start_round(parent, run_id, r)
        metrics = res.metrics
        if not tracker.is_logged(child):  # a resume logs only the rounds (or their parts) not logged yet
            tracker.log_metrics(child, metrics, step=r)
            tracker.log_metrics(parent, {k: v for k, v in metrics.items() if "." not in k}, step=r)
            evaluated_by = next((e.model_version for e in [*res.diagnostic, *res.test]), "")
            tracker.log_params(child, {"space_version_in": res.space_in.version, "steering": steering.kind,
                                       "learner": cfg.learner, "model_version": evaluated_by})
            tracker.log_space(child, res.space_out)
            if res.reflection is not None:
                tracker.log_reflection(child, res.reflection)
            tracker.log_json(child, "directions.json", [d.model_dump(mode="json") for d in res.directions])
            tracker.finish(child)
            tracker.mark_logged(child)
        diff = "; ".join(f"{c.kind} {c.factor}" for c in res.space_out.diff) if res.space_out.version > \
            res.space_in.version else "no change"
        summary.rounds.append({"round": r, **metrics, "diff": diff})
        say(f"round {r}: verified {res.verified}/{res.blueprints}, diagnostic "
            f"{metrics['success_diagnostic']:.3f}, test {metrics.get('success_test', float('nan')):.3f}, test uniform "
            f"{metrics.get('success_test_uniform', 0.0):.3f}, space: {diff}")
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
