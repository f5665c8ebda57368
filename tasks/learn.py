"""Train the task agent on all verified data so far, and evaluate it on held-out tasks."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.agents.learners.harness import TaskCase, evaluate
from evosyn.envs.packs import default_domain
from evosyn.storage.atomic import read_or_none
from evosyn.storage.faults import kill_point
from evosyn.storage.records import Evaluation, Trajectory
from evosyn.storage.store import Store
from evosyn.tasks.datasets import as_trajectories, diagnostic_cases, system_prompt
from evosyn.tasks.dedup import training_examples
from evosyn.tasks.progress import Emit, StageEvent
from evosyn.tasks.testset import TASK_SETS, test_cases

if TYPE_CHECKING:
    from evosyn.envs.base import Domain


@dataclass(frozen=True)
class Checkpoint:
    """A round's trained checkpoint; ``fingerprint`` names it in every evaluation and feedback row."""

    path: Path
    fingerprint: str
    n_trajectories: int  # examples trained on
    held_out: int = 0  # diagnostic examples of rounds <= r: evaluated on, never trained on
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> examples the export left out
    learner: str = "llamafactory"

    def metrics(self) -> dict[str, float]:
        return {"sft_exported": float(self.n_trajectories), "sft_dropped": float(sum(self.dropped.values())),
                "sft_held_out": float(self.held_out)}


def model_path(store: Store, run_id: str, round: int) -> Path:
    return store.root / "models" / run_id / f"round={round}" / "embedded.joblib"


def model_version(learner, run_id: str, round: int) -> str:
    """``<run>/r<round>/<fingerprint>``: the embedded model's hash, or ``llamafactory-<hash>`` of a checkpoint."""
    return f"{run_id}/r{round}/{learner.fingerprint}"


def run_domain(store: Store, run_id: str, domain: str | None = None) -> str:
    """``domain``, else the stored run's domain, else its tasks' (a synthesis pass stores no run row), else the
    default domain pack."""
    if domain:
        return domain
    return (next((r.domain for r in store.read_records("runs", run_id=run_id)), None)
            or next((t["domain"] for t in store.read_fields("tasks", ["domain"], run_id=run_id)), None)
            or default_domain())


def fit_embedded(trajectories: list[Trajectory], env: Domain, seed: int = 0) -> EmbeddedLearner:
    """The embedded learner fitted on ``trajectories`` over ``env``'s assistant tools."""
    tools = [t.openai_schema() for t in env.tools("assistant")]
    return EmbeddedLearner(seed=seed).fit(trajectories, tools)


def train_round(store: Store, run_id: str, round: int, env: Domain, seed: int = 0
                ) -> tuple[EmbeddedLearner, Path, float]:
    """SFT (behaviour cloning) on every training example of rounds <= ``round``; saved as an artifact. ``env``:
    the run's environment (``run_domain`` names it), resolved by the caller."""
    examples = training_examples(store, run_id, round)
    t0 = time.perf_counter()
    learner = fit_embedded(as_trajectories(examples, system_prompt(store, run_id, env)), env, seed=seed)
    seconds = time.perf_counter() - t0
    return learner, learner.save(model_path(store, run_id, round)), seconds


def load_round(store: Store, run_id: str, round: int) -> EmbeddedLearner:
    path = model_path(store, run_id, round)
    learner = read_or_none(path, EmbeddedLearner.load, "model")
    if learner is None:
        raise FileNotFoundError(f"no trained model for run {run_id} round {round} ({path} is missing or "
                                "unreadable; run `evosyn train` first)")
    return learner


EVAL_BATCH = 20  # tasks between two progress events (each task is evaluated on its own: batching changes no row)


def evaluated(run_id: str, round: int, task_set: str, batch: list[Evaluation], total: int, before: int,
              successes_before: int = 0, seconds: float = 0.0) -> StageEvent:
    """The event of a batch of evaluations: its successes kept, its failures by first failed check; the detail
    is the success rate so far (``0.52 on 171 tasks``)."""
    ok = sum(e.success for e in batch)
    failed = Counter((e.failed_checks or ["unknown"])[0] for e in batch if not e.success)
    n, s = before + len(batch), successes_before + ok
    tasks = "task" if total == 1 else "tasks"
    if not n:  # an empty set (a small budget can hold out no diagnostic task)
        rate = "no tasks"
    else:
        rate = f"{s / n:.2f} on {n} {tasks}" if n == total else f"{s / n:.2f} on {n} of {total} {tasks} so far"
    return StageEvent(run_id=run_id, round=round, stage=f"evaluate {task_set}", done=len(batch), kept=ok,
                      rejected=dict(failed), total=total, detail=rate, seconds=seconds)


def evaluate_round(store: Store, run_id: str, round: int, task_set: str, learner: EmbeddedLearner | None = None,
                   cases: list[TaskCase] | None = None, *, env: Domain,
                   emit: Emit | None = None, max_steps: int = 40) -> list[Evaluation]:
    """``emit``: a ``StageEvent`` every ``EVAL_BATCH`` tasks (stage ``evaluate <task_set>``). ``learner``: any
    task agent with a ``fingerprint`` (the embedded learner, a served checkpoint); default the round's
    embedded learner. ``env``: the run's environment (``run_domain`` names it), resolved by the caller."""
    learner = learner or load_round(store, run_id, round)
    if cases is None:
        cases = diagnostic_cases(store, run_id, round) if task_set == "diagnostic" else \
            test_cases(store, env, kind=TASK_SETS[task_set])
    evaluations, trajectories = [], []
    version = model_version(learner, run_id, round)
    for i in range(0, len(cases), EVAL_BATCH) if cases else [0]:
        t0 = time.monotonic()
        evs, trajs = evaluate(learner, cases[i:i + EVAL_BATCH], env, run_id=run_id, round=round, task_set=task_set,
                              model_version=version, id_key=f"r{round}/{learner.fingerprint}", max_steps=max_steps)
        if emit is not None:
            emit(evaluated(run_id, round, task_set, evs, len(cases), len(evaluations),
                           sum(e.success for e in evaluations), time.monotonic() - t0))
        evaluations += evs
        trajectories += trajs
        flush = getattr(learner, "flush", None)  # a learner that calls a model: its calls' rows so far (a kill
        if flush is not None:  # mid-set loses none; a redo's cache replays of them are not added again)
            flush(store, f"eval-{task_set}")
    if evaluations:
        store.write(trajectories, f"eval-{task_set}")
        kill_point("evaluate", round)
        store.write(evaluations, f"eval-{task_set}")
    return evaluations
