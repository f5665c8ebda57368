"""One EvoSyn round as a Prefect flow: design -> plan -> generate -> rollout -> verify -> dedup -> train -> evaluate
-> reflect.

The round composes the stages' Prefect tasks, each a thin wrapper defined beside its stage function in
``tasks/`` (``evosyn.tasks.stages``, ``evosyn.tasks.loop``, ``evosyn.tasks.checkpoint``, ``evosyn.tasks.official_agents``: the same
functions ``evosyn synth`` and the test set run in-process); per-item work
(generate, rollout, verify) is mapped over chunks of blueprints with bounded
concurrency. Every stage is idempotent over the store, so a rerun after a
crash redoes only the chunks that are missing.

Each task logs what its stage did to its Prefect task run ("verify: 5/6 kept;
rejected: policy 1") and publishes the events to the process's listeners
(``evosyn.tasks.engine.publish``; ``evosyn.flows.progress`` draws them on the terminal); the round's flow run logs each
stage's total line and, at its end, publishes its artifacts (``evosyn.flows.artifacts``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from prefect import flow, get_run_logger, unmapped
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import opaque, quote

from evosyn.agents.designer import Steering
from evosyn.flows.artifacts import publish_round
from evosyn.flows.compile import stored_domain
from evosyn.flows.task_runners import THREAD_WORKERS
from evosyn.flows.train import train_via_deployment
from evosyn.config import RunConfig
from evosyn.storage.records import Direction, Evaluation, Feedback, Reflection, SynthesisSpace
from evosyn.tasks import checkpoint, loop, stages, timing
from evosyn.tasks.checkpoint import evaluate_checkpoint_task, train_checkpoint_task
from evosyn.tasks.dedup import DedupCounts, dedup_task
from evosyn.tasks.engine import listening, publish
from evosyn.tasks.learn import Checkpoint
from evosyn.tasks.loop import evaluate_task, reflect_task, train_task
from evosyn.tasks.metrics import intrinsic, round_metrics, verified_samples
from evosyn.tasks.official import OfficialResult
from evosyn.tasks.official_agents import official_task
from evosyn.tasks.overlap import overlap, scored_metrics
from evosyn.tasks.progress import StageEvent, Tally
from evosyn.tasks.served import ServedLearner, hook_task, serve_task, trials_task
from evosyn.tasks.stages import Ctx, design_task, generate_task, plan_task, rollout_task, verify_task

@dataclass
class RoundResult:
    round: int
    space_in: SynthesisSpace
    space_out: SynthesisSpace
    blueprints: int
    verified: int
    feedback: Feedback
    reflection: Reflection | None
    diagnostic: list[Evaluation]
    test: list[Evaluation]  # the official-matched test set (task_set "test")
    directions: list[Direction]
    metrics: dict[str, float] = field(default_factory=dict)
    official: OfficialResult | None = None  # the run config's `official_eval`, when it asks for one
    test_uniform: list[Evaluation] = field(default_factory=list)  # the uniform test set (task_set "test_uniform")
    dedup: DedupCounts = field(default_factory=DedupCounts)  # the round's verified tasks (tasks/dedup.py)
    dedup_test_sets: DedupCounts = field(default_factory=DedupCounts)  # the fixed test sets' own tasks


def round_metrics_of(ctx: Ctx, res: RoundResult) -> dict[str, float]:
    """The round's metrics as MLflow and the round's table artifact have them (NaN left out)."""
    store, run_id = ctx.store, ctx.run_id
    samples = verified_samples(store, run_id, res.round)
    m = intrinsic(samples, ctx.pack)  # diversity vs this run's own patterns; `evosyn compare` shares a union
    extra = round_metrics(store, run_id, ctx.pack, res.round, samples)
    m.update({k: v for k, v in extra.items() if not math.isnan(v)})
    rate = lambda evs: (sum(e.success for e in evs) / len(evs)) if evs else 0.0  # noqa: E731
    m.update({"verified_yield": res.verified / max(1, res.blueprints), "verified_total": float(len(samples)),
              "success_diagnostic": rate(res.diagnostic),
              # a domain without official tasks has no official-matched set: no success_test (not a 0)
              **({"success_test": rate(res.test)} if res.test else {}),
              "success_test_uniform": rate(res.test_uniform),
              "space_version": float(res.space_out.version)})
    m.update(res.dedup.metrics())
    m.update(res.dedup_test_sets.metrics("dedup_test_sets_"))
    # the score the summary calls "test" (the uniform set's when the domain has no official-matched one), and the
    # share of the training data that copies each test set (NaN left out: a set the domain does not have)
    m.update({k: v for k, v in overlap(store, ctx.env, run_id, res.round).items() if not math.isnan(v)})
    if not math.isnan(score := scored_metrics(m)["success_test_scored"]):
        m["success_test_scored"] = score
    for s in res.feedback.performance:
        if s.factor in ("num_write", "task_family", "expected_outcome") and s.success_rate is not None:
            m[f"success_diag.{s.factor}.{s.value}"] = s.success_rate
    by_bucket: dict[str, list[int]] = {}
    for e in res.test:
        for v in e.observed.get("num_write", []):
            by_bucket.setdefault(v, []).append(int(e.success))
    for v, xs in by_bucket.items():
        m[f"success_test.num_write.{v}"] = sum(xs) / len(xs)
    by_bucket = {}
    for e in res.test_uniform:  # the same per bucket on the uniform set (a domain's only one without official tasks)
        for v in e.observed.get("num_write", []):
            by_bucket.setdefault(v, []).append(int(e.success))
    for v, xs in by_bucket.items():
        m[f"success_test_uniform.num_write.{v}"] = sum(xs) / len(xs)
    return m


# the run picks the runner per round from its config (flows/task_runners.py: `round_flow.with_options`)
@flow(name="evosyn-round", task_runner=ThreadPoolTaskRunner(max_workers=THREAD_WORKERS))
def round_flow(cfg: RunConfig, run_id: str, round: int, space: SynthesisSpace, steering: Steering,
               previous: Feedback | None = None) -> RoundResult:
    """Round ``round`` of run ``run_id`` under ``cfg`` (its LLM roles already checked by ``check_roles``)."""
    logger, tally = get_run_logger(), Tally()

    def stage_done(ev: StageEvent) -> None:  # from the task threads: each stage's total line, once
        if ev.round == round:
            for st in tally.add(ev):
                logger.info(st.line())

    with timing.span("body", "round", round):
        with listening(run_id, stage_done):
            res = _round(cfg, run_id, round, space, steering, previous)
        with timing.span("own", "artifacts", round):
            publish_round(run_id, res, [st for st in tally.snapshot() if st.round == round])
    return res


def _round(cfg: RunConfig, run_id: str, round: int, space: SynthesisSpace, steering: Steering,
           previous: Feedback | None) -> RoundResult:
    ctx = Ctx.for_run(cfg, run_id, round, stored_domain(cfg.domain))  # the run's, compiled before round 1
    # Prefect walks every task argument (to find futures to wait on and the upstream runs to draw) and every
    # resolved result: the round's inputs (context, space, steering, blueprint chunks) come from no task, so
    # they go in `quote`d; a chunk's result goes `opaque` (awaited and drawn as the upstream run, but not
    # walked: 50 tasks or trajectories each)
    c, sp = quote(ctx), quote(space)
    # the chunk tasks go to the run's task runner; prefect-dask cannot carry these annotations (a tuple to Dask's
    # graph, so the task would get a tuple: prefect-dask issue 43), so on Dask they get their arguments bare
    bare = cfg.task_runner == "dask"
    mc, msp = (ctx, space) if bare else (c, sp)
    wrap = (lambda x: x) if bare else quote  # noqa: E731
    done = (lambda f: f) if bare else opaque  # noqa: E731
    with timing.span("task", "design", round):
        directions = design_task(c, sp, quote(steering), cfg.budget, cfg.arm)
    with timing.span("task", "plan", round):
        blueprints = plan_task(c, sp, directions)  # a task's output: walked, so the UI draws design -> plan
    parts = stages.chunks(blueprints, cfg.chunk_size)
    with timing.span("task", "generate+rollout+verify", round):  # mapped chunks: the three stages overlap
        generated = generate_task.map(unmapped(mc), unmapped(msp), [wrap(part) for part in parts])
        names = [stages.chunk_name("chunk", part) for part in parts]
        rolled = rollout_task.map(unmapped(mc), [done(f) for f in generated], names)
        verified = verify_task.map(unmapped(mc), [done(f) for f in generated], [done(f) for f in rolled], names)
        examples = [e for f in verified for e in f.result()[1]]
    with timing.span("task", "dedup", round):  # after every verify chunk: it reads their examples from the store
        counts, set_counts = dedup_task(c, cfg.test_size)
    # SFT on a (GPU) work pool through its deployment when configured, otherwise in this process
    lf = quote(cfg.llamafactory)
    with timing.span("task", "train", round):
        if cfg.train_deployment:
            t0 = time.monotonic()
            learner = train_via_deployment(ctx, cfg.train_deployment, cfg.learner, cfg.llamafactory)
            how = f" on deployment {cfg.train_deployment}"
            if isinstance(learner, Checkpoint):
                checkpoint.trained_event(publish, ctx, learner, how, t0)
            else:
                loop.trained(publish, ctx, learner, how, t0)
        elif cfg.learner == "llamafactory":
            learner = train_checkpoint_task(c, lf)
        elif cfg.learner == "served":  # the user's model: trained between rounds by its hook, if at all
            learner = serve_task(c, quote(cfg.served))
        else:
            learner = train_task(c)
    if isinstance(learner, Checkpoint):  # served while both sets are evaluated, then stopped
        with timing.span("task", "evaluate", round):
            diagnostic, test, test_uniform = evaluate_checkpoint_task(c, quote(learner), lf, cfg.test_size)
    else:
        # a served learner holds a client (threads, connections): handed to the tasks unwalked
        served = isinstance(learner, ServedLearner)
        lq, steps = (quote(learner), cfg.served.max_steps or 40) if served and cfg.served else (learner, 40)
        with timing.span("task", "evaluate", round):
            diagnostic = evaluate_task(c, lq, "diagnostic", cfg.test_size, steps)
        with timing.span("task", "evaluate", round):
            test = evaluate_task(c, lq, "test", cfg.test_size, steps)
        with timing.span("task", "evaluate", round):
            test_uniform = evaluate_task(c, lq, "test_uniform", cfg.test_size, steps)
    official = None
    if cfg.official_eval is not None:  # tau2's official split, when the run config asks for it
        with timing.span("task", "evaluate official", round):
            official = official_task(c, quote(learner) if isinstance(learner, ServedLearner) else learner,
                                     quote(cfg.official_eval))
    with timing.span("task", "reflect", round):
        feedback, _, reflection, nxt = reflect_task(c, sp, cfg.arm, diagnostic,
                                                        quote(learner) if isinstance(learner, ServedLearner) else learner,
                                                        quote(previous))
    if isinstance(learner, ServedLearner):
        if cfg.served is not None and cfg.served.trials:  # pass@k per verified task of the round
            with timing.span("task", "evaluate", round):
                trials_task(c, quote(cfg.served), quote(learner))
        learner.close()
        if cfg.served is not None and cfg.served.train == "hook":  # the user's trainer, on this round's export
            with timing.span("task", "train", round):
                hook_task(c, quote(cfg.served), learner.served)
    res = RoundResult(round=round, space_in=space, space_out=nxt, blueprints=len(blueprints),
                      verified=len({e.task_id for e in examples}), feedback=feedback, reflection=reflection,
                      diagnostic=diagnostic, test=test, directions=directions, official=official,
                      test_uniform=test_uniform, dedup=counts, dedup_test_sets=set_counts)
    with timing.span("own", "metrics", round):
        res.metrics = round_metrics_of(ctx, res)
        if official is not None:
            res.metrics.update(official.metrics())
        if isinstance(learner, Checkpoint):
            res.metrics.update(learner.metrics())
    return res
