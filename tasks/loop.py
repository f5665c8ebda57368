"""Train, evaluate and reflect: the learner-facing half of a round, idempotent over the store.

The arms (App. B.1, "Controlled comparisons"): every arm has the same environment, tools, policy, verifier,
learner, SFT recipe, evaluation sets, budget per round and rounds (with ``stop_after_static_rounds: 0``, as
`evosyn bench learning` runs them, no arm stops early); each differs from ``evosyn`` only in these knobs:

=============  ===============================================  =========================================
arm            Reflector (``reflect``: may revise the space)    Designer's steering (``steering_for``)
=============  ===============================================  =========================================
evosyn         yes, with learner evidence (diagnostic           learner feedback; the factor just added,
               failures, coverage, probes)                      with its verified coverage per value
static         none: the initial space, frozen                  cold start every round (frozen allocation)
no_feedback    yes, without learner evidence (B.6: the space,   cold start (no learner feedback); the
               environment and tool schemas only)               factor just added, without coverage counts
no_reflector   none: the initial space, frozen                  learner feedback
no_designer    yes, with learner evidence                       cold start every round
single_agent   none                                             one unconstrained direction (``design``)
=============  ===============================================  =========================================
"""
from __future__ import annotations

import time

import prefect

from evosyn.agents.feedback import FeedbackInputs, build_feedback, probe_report
from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.agents.probes import TaskProfile
from evosyn.storage.atomic import read_or_none
from evosyn.storage.faults import kill_point
from evosyn.storage.records import PROBING_ARMS, Arm, Evaluation, Feedback, Probe, Reflection, SynthesisSpace
from evosyn.tasks import timing
from evosyn.tasks.engine import STAGE_TASK, emitter
from evosyn.tasks.datasets import as_trajectories, diagnostic_cases, system_prompt
from evosyn.tasks.dedup import training_examples
from evosyn.tasks.learn import Checkpoint, evaluate_round, evaluated, fit_embedded, model_path, model_version
from evosyn.tasks.progress import Emit
from evosyn.tasks.stages import Ctx, emit_event
from evosyn.tasks.testset import DEFAULT_SIZE, TASK_SETS, test_cases, test_set_run_id

REFLECTING_ARMS = {"evosyn", "no_feedback", "no_designer"}


def trained(emit: Emit | None, ctx: Ctx, learner, how: str = "", since: float | None = None) -> None:
    emit_event(emit, ctx, "train", 1, 1, total=1, since=since,
               detail=f"{learner.n_trajectories} trajectories{how} (model {learner.fingerprint})")


def train(ctx: Ctx, emit: Emit | None = None):
    from evosyn.agents.learners.embedded import EmbeddedLearner, fingerprint

    t0 = time.monotonic()
    examples = training_examples(ctx.store, ctx.run_id, ctx.round)
    path = model_path(ctx.store, ctx.run_id, ctx.round)
    learner = read_or_none(path, EmbeddedLearner.load, "model")  # a truncated or corrupt model is retrained
    if learner is not None and learner.fingerprint == fingerprint(as_trajectories(examples)):
        trained(emit, ctx, learner, ", trained before", t0)
        return learner
    # each trajectory opens with its agent's system prompt (read only when a model is fitted)
    trajectories = as_trajectories(examples, system_prompt(ctx.store, ctx.run_id, ctx.env))
    learner = fit_embedded(trajectories, ctx.env, ctx.seed)
    learner.save(path)
    trained(emit, ctx, learner, since=t0)
    return learner


def evaluate(ctx: Ctx, learner, task_set: str, test_size: int = DEFAULT_SIZE, emit: Emit | None = None,
             max_steps: int = 40) -> list[Evaluation]:
    """The learner on ``task_set``: "diagnostic" (this run's held-out tasks), "test" (the official-matched
    test set) or "test_uniform" (the uniform test set), each test set of ``test_size`` tasks."""
    if task_set != "diagnostic" and task_set not in TASK_SETS:
        raise ValueError(f"task set {task_set!r}: use diagnostic or one of {', '.join(TASK_SETS)}")
    chunk = f"eval-{task_set}"
    if ctx.done("evaluate", chunk):
        out = ctx.read("evaluations", chunk)
        if emit is not None:
            emit(evaluated(ctx.run_id, ctx.round, task_set, out, len(out), 0))
        return out
    cases = (diagnostic_cases(ctx.store, ctx.run_id, ctx.round) if task_set == "diagnostic"
             else test_cases(ctx.store, ctx.env, n=test_size, kind=TASK_SETS[task_set]))
    out = evaluate_round(ctx.store, ctx.run_id, ctx.round, task_set, learner=learner, cases=cases, env=ctx.env,
                         emit=emit, max_steps=max_steps)
    _flush(ctx, learner, chunk)
    ctx.mark("evaluate", chunk)  # also an empty set (no diagnostic tasks yet): nothing to write, and done
    return out


def _flush(ctx: Ctx, learner, chunk: str) -> None:
    """A learner that calls a model (``learner: served``) writes its calls to ``llm_calls`` before the marker."""
    flush = getattr(learner, "flush", None)
    if flush is not None:
        flush(ctx.store, chunk)


PROBE_SEED = 7_000_000  # probe sets: seed PROBE_SEED + 1000 x run seed + round (test sets use TEST_SEED)


def probe_seed(seed: int, round: int) -> int:
    return PROBE_SEED + 1000 * seed + round


def probe_evaluations(ctx: Ctx, learner, size: int, emit: Emit | None = None, max_steps: int | None = None
                      ) -> tuple[list[Evaluation], str]:
    """The round's learner on a balanced probe set of ``size`` blueprints: the uniform test set's builder
    (every controllable property in turn, the run's planted prior not applied) in its own run id
    (``probeset-uniform-...``, seeded by the run's seed and round, so every run of that seed shares it). Never
    training data and never a test set: the Reflector reads its probes on it, beside the diagnostic set.
    Returns the evaluations (task set ``probe``, stored with the run: a resumed round reuses them) and the
    probe set's run id."""
    seed = probe_seed(ctx.seed, ctx.round)
    run_id = test_set_run_id(ctx.env, seed, size, "uniform", "probeset")
    chunk = "eval-probe"
    if ctx.done("evaluate", chunk):
        return ctx.read("evaluations", chunk), run_id
    cases = test_cases(ctx.store, ctx.env, n=size, seed=seed, kind="uniform", name="probeset")
    steps = max_steps or getattr(learner, "max_steps", 40)  # a served learner's own bound (served.max_steps)
    out = evaluate_round(ctx.store, ctx.run_id, ctx.round, "probe", learner=learner, cases=cases, env=ctx.env,
                         emit=emit, max_steps=steps)
    _flush(ctx, learner, chunk)
    ctx.mark("evaluate", chunk)
    return out, run_id


def _profiles(ctx: Ctx, run: str, upto: int, added: list[str]) -> tuple[dict, dict, dict]:
    """(task -> factor values, task -> TaskProfile, task -> its passed verdict's fields) of run ``run``'s rounds
    <= ``upto``."""
    store = ctx.store
    # a task's requested values only: its tau2 task (most of the row) is not parsed
    tasks = {t["task_id"]: t["requested"] for t in store.read_fields("tasks", ["task_id", "round", "requested"],
                                                                      run_id=run) if t["round"] <= upto}
    passed = {v["task_id"]: v for v in store.read_fields(
        "verdicts", ["task_id", "round", "passed", "observed", "trajectory_id"], run_id=run)
        if v["passed"] and v["round"] <= upto}
    wanted = {v["trajectory_id"] for v in passed.values()}  # only their trajectories are parsed
    trajs = {t.trajectory_id: t for t in store.read_records("trajectories", run_id=run,
                                                             where=lambda row: row["trajectory_id"] in wanted)}
    values, profiles = {}, {}
    for tid, v in passed.items():
        requested = tasks.get(tid)
        if requested is None:
            continue
        vals = {k: list(vs) for k, vs in requested.items()}
        observed = v["observed"]
        vals.update({k: vs for k, vs in observed.items() if k in ("num_write", "num_read")})
        values[tid] = vals
        gold = trajs.get(v["trajectory_id"])
        stratum = tuple((vals.get(k) or [""])[0] for k in ("task_family", "expected_outcome", "difficulty_profile"))
        stratum += tuple((observed.get(k) or vals.get(k) or [""])[0] for k in added)
        profiles[tid] = TaskProfile(tid, observed, stratum, gold.messages if gold else [])
    return values, profiles, passed


def _inputs(ctx: Ctx, space: SynthesisSpace, diagnostic: list[Evaluation], previous: Feedback | None,
            evidence: bool, probes: tuple[list[Evaluation], str] | None = None) -> FeedbackInputs:
    # the stratum O_r: the seed factors, then every factor the space has added (its observed value if measured)
    added = [f.key for f in space.active if f.status != "seed"]
    values, profiles, passed = _profiles(ctx, ctx.run_id, ctx.round, added)
    probe_evals: list[Evaluation] = []
    if probes is not None:  # the probe set's tasks: profiled for the probes, never coverage or performance
        probe_evals, probe_run = probes
        profiles = {**_profiles(ctx, probe_run, 0, added)[1], **profiles}
    return FeedbackInputs(space=space, values=values, evaluations=diagnostic, verified=sorted(passed),
                          profiles=profiles, previous=previous, with_learner_evidence=evidence,
                          probe_evaluations=probe_evals)


def space_change(before: SynthesisSpace, after: SynthesisSpace) -> str:
    """``v1 -> v2: add_value num_write`` or ``v1, no change``."""
    if after.version == before.version:
        return f"v{before.version}, no change"
    return f"v{before.version} -> v{after.version}: " + ("; ".join(f"{c.kind} {c.factor}" for c in after.diff)
                                                         or "revised")


def _reflected(emit: Emit | None, ctx: Ctx, space: SynthesisSpace, reflection: Reflection | None,
               nxt: SynthesisSpace, t0: float) -> None:
    who = "no Reflector in this arm" if reflection is None else f"steering {reflection.steering.replace('_', ' ')}"
    emit_event(emit, ctx, "reflect", 1, 1, total=1, detail=f"space {space_change(space, nxt)} ({who})", since=t0)


def reflect(ctx: Ctx, space: SynthesisSpace, arm: str, diagnostic: list[Evaluation], learner,
            previous: Feedback | None, emit: Emit | None = None
            ) -> tuple[Feedback, list[Probe], Reflection | None, SynthesisSpace]:
    chunk, t0 = "reflect", time.monotonic()
    if ctx.done("reflect", chunk):
        refl = ctx.read("reflections", chunk)
        out = ctx.read("feedback", chunk)[0], ctx.read("probes", chunk), (refl[0] if refl else None), \
            ctx.read("spaces", chunk)[0]
        _reflected(emit, ctx, space, out[2], out[3], t0)
        return out
    evidence = arm != "no_feedback"
    probes_on = probe_evaluations(ctx, learner, ctx.probe_size, emit) if ctx.probe_size and arm in PROBING_ARMS \
        else None
    inp = _inputs(ctx, space, diagnostic, previous, evidence=evidence, probes=probes_on)
    version = model_version(learner, ctx.run_id, ctx.round)
    fb = build_feedback(inp, run_id=ctx.run_id, round=ctx.round, model_version=version)
    probes = probe_report(inp, ctx.pack, run_id=ctx.run_id, round=ctx.round)
    reflection, nxt = None, space
    if arm in REFLECTING_ARMS:
        earlier = [x for x in ctx.store.read_records("reflections", run_id=ctx.run_id) if x.round < ctx.round] \
            if ctx.llm_roles else []
        roles = ctx.roles(learner_evidence=arm != "no_feedback", previous_reflections=earlier)
        reflection, nxt = roles.reflector.reflect(space, fb, probes, round=ctx.round)
        ctx.flush(roles, chunk)
    ctx.store.write([fb], chunk)
    kill_point("reflect", ctx.round)
    ctx.put("probes", probes, chunk)
    ctx.put("reflections", [reflection] if reflection is not None else [], chunk)
    stored = nxt.model_copy(update={"run_id": ctx.run_id, "round": ctx.round, "space_version": nxt.version})
    ctx.store.write([stored], chunk)
    ctx.mark("reflect", chunk)  # after the last write: marks the round as complete
    _reflected(emit, ctx, space, reflection, stored, t0)
    return fb, probes, reflection, stored


# --- the loop stages' Prefect tasks (flows/round.py composes them)

@prefect.task(name="train", **STAGE_TASK)
def train_task(ctx: Ctx) -> EmbeddedLearner:
    with timing.span("fn", "train", ctx.round):
        return train(ctx, emit=emitter())


@prefect.task(name="evaluate", **STAGE_TASK)
def evaluate_task(ctx: Ctx, learner: EmbeddedLearner, task_set: str, test_size: int, max_steps: int = 40
                  ) -> list[Evaluation]:
    with timing.span("fn", "evaluate", ctx.round):
        return evaluate(ctx, learner, task_set, test_size, emit=emitter(), max_steps=max_steps)


@prefect.task(name="reflect", **STAGE_TASK)
def reflect_task(ctx: Ctx, space: SynthesisSpace, arm: Arm, diagnostic: list[Evaluation],
                 learner: EmbeddedLearner | Checkpoint, previous: Feedback | None):
    with timing.span("fn", "reflect", ctx.round):
        return reflect(ctx, space, arm, diagnostic, learner, previous, emit=emitter())
