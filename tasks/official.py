"""A task agent on a split of tau2's official tasks: k trials per task, our verifier, tau2's pass^k.

The tasks and splits are the installed tau2 package's own (``Domain.tasks(split)``:
its ``split_tasks.json`` per domain, e.g. ``train`` / ``test`` / ``base``), or those of a
tau2 data folder given by path (``tasks_path``: e.g. a tau2-bench v1.0.1 checkout, whose task
fixes the package predates). Every result names its task set (``evosyn.envs.task_sets.TaskSet``:
the package and version, or the folder, and the tasks file's SHA-256).
Each trial is one conversation between the agent and a user simulator (scripted or
an LLM, ``evosyn.agents.official_user``) on a fresh copy of the task's initial state
(``evosyn.agents.learners.harness.converse``, the loop every evaluation runs),
scored by ``evosyn.envs.verify.run_checks``: the reward is tau2's (its reward basis, as
tau2's evaluator computes it), the strict checks are reported beside it (an
evaluation's ``success`` is both: reward 1 and every check). pass^k is tau2's
(``tau2.metrics.agent_metrics``): per task C(c, k) / C(n, k) with c of its n trials
successful, averaged over tasks, for k = 1 .. the fewest trials of any task.

Rows: one ``Evaluation`` per (task, trial) with ``task_set`` ``official:<split>``
and its ``trial``, and its ``Trajectory``, as chunk ``official-<split>-<hash>`` of
the round (the hash names the agent, the user and the trials, so two agents
evaluated on the same round keep their own rows).
"""
from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evosyn.agents.learners.base import TaskAgent
from evosyn.agents.learners.harness import converse
from evosyn.envs.base import Domain
from evosyn.envs.task_sets import TaskSet
from evosyn.envs.verify import run_checks
from evosyn.storage.records import Contract, Evaluation, Trajectory
from evosyn.storage.store import Store
from evosyn.tasks.progress import Emit, StageEvent

SUCCESS_TOLERANCE = 1e-6  # tau2's ``is_successful``: a reward within 1e-6 of 1


def is_success(reward: float) -> bool:
    return (1 - SUCCESS_TOLERANCE) <= reward <= (1 + SUCCESS_TOLERANCE)


def pass_hat_k(num_trials: int, successes: int, k: int) -> float:
    """tau2's pass^k of one task: the chance that k of its trials drawn without replacement all succeed."""
    if not 1 <= k <= num_trials:
        raise ValueError(f"k={k} needs 1 <= k <= the number of trials ({num_trials})")
    return math.comb(successes, k) / math.comb(num_trials, k)


def pass_hat_ks(outcomes: Mapping[str, Sequence[bool]]) -> dict[int, float]:
    """{k: mean over tasks of pass^k} for k = 1 .. the fewest trials of any task (tau2 caps k the same way)."""
    if not outcomes:
        return {}
    max_k = min(len(v) for v in outcomes.values())
    return {k: sum(pass_hat_k(len(v), sum(map(bool, v)), k) for v in outcomes.values()) / len(outcomes)
            for k in range(1, max_k + 1)}


def task_set_name(split: str) -> str:
    return f"official:{split}"


def official_domain(dom: Domain, tasks_path: str | Path | None = None) -> Domain:
    """The environment with its official tasks: the package's, or the tau2 data folder's at ``tasks_path``
    (``FileNotFoundError`` / ``ValueError``, one line, for a folder that has none)."""
    return dom.with_tasks(Path(tasks_path)) if tasks_path is not None else dom


def official_tasks(dom: Domain, split: str, max_tasks: int | None = None,
                   task_ids: Sequence[str] | None = None) -> list[Any]:
    """The split's tasks in tau2's order: those of ``task_ids`` (all when None), then the first ``max_tasks``.

    ``dom``: the environment (``official_domain``: the package's tasks, or a folder's).
    ``KeyError`` (one line) for a split the domain lacks (naming the known ones) or an id not in the split.
    """
    tasks = dom.tasks(split)
    if task_ids is not None:
        missing = sorted(set(task_ids) - {t.id for t in tasks})
        if missing:
            raise KeyError(f"task ids {', '.join(missing)} are not in {dom.name}'s {split} split")
        tasks = [t for t in tasks if t.id in set(task_ids)]
    return tasks[:max_tasks] if max_tasks else tasks


# ------------------------------------------------------------------ the user simulator
@dataclass
class UserSim:
    """Who plays the customer: the scripted user (``client`` None) or an LLM through our client."""

    label: str  # "embedded", or "<provider>:<model>"
    client: Any = None  # a bound ``LLMClient`` (its calls go to ``llm_calls``)
    retries: int = 2

    def for_task(self, domain: Domain, task: Any, trial: int):
        from evosyn.agents.official_user import llm_user, scripted_user

        if self.client is None:
            return scripted_user(domain, task)
        return llm_user(self.client, task, trial, self.retries, domain)


# ------------------------------------------------------------------ results
class TaskOutcome(Contract):
    task_id: str
    rewards: list[float]  # one per trial, tau2's reward
    strict: list[bool]  # one per trial: reward 1 and every strict check
    failed_checks: list[list[str]]


class OfficialResult(Contract):
    run_id: str
    round: int
    domain: str
    split: str
    task_set: str
    trials: int
    model_version: str
    user: str
    chunk: str
    task_source: TaskSet  # which tasks: the package and version, or the folder; the tasks file's SHA-256
    tasks: list[TaskOutcome]
    pass_hat: dict[int, float]  # tau2's pass^k from the rewards
    strict_pass_hat: dict[int, float]  # the same from the strict outcome
    avg_reward: float

    def metrics(self, prefix: str | None = None) -> dict[str, float]:
        """MLflow metrics: ``<prefix>_avg_reward``, ``<prefix>_pass_hat_<k>``, ``<prefix>_strict_pass_hat_<k>``."""
        p = prefix or f"official_{self.split}"
        out = {f"{p}_avg_reward": self.avg_reward, f"{p}_tasks": float(len(self.tasks))}
        out.update({f"{p}_pass_hat_{k}": v for k, v in self.pass_hat.items()})
        out.update({f"{p}_strict_pass_hat_{k}": v for k, v in self.strict_pass_hat.items()})
        return out


def result_of(evaluations: list[Evaluation], *, run_id: str, round: int, domain: str, split: str, trials: int,
              model_version: str, user: str, chunk: str, task_source: TaskSet) -> OfficialResult:
    """The per-task rewards and pass^k of a split's evaluation rows (fresh, or read back from the store);
    ``task_source``: the tasks they ran on (``Domain.task_set()``)."""
    by_task: dict[str, list[Evaluation]] = {}
    for e in sorted(evaluations, key=lambda e: e.trial):
        by_task.setdefault(e.task_id, []).append(e)
    outcomes = [TaskOutcome(task_id=tid, rewards=[e.reward for e in evs], strict=[e.success for e in evs],
                            failed_checks=[e.failed_checks for e in evs]) for tid, evs in by_task.items()]
    rewards = [r for o in outcomes for r in o.rewards]
    return OfficialResult(
        run_id=run_id, round=round, domain=domain, split=split, task_set=task_set_name(split), trials=trials,
        model_version=model_version, user=user, chunk=chunk,
        task_source=task_source, tasks=outcomes,
        pass_hat=pass_hat_ks({o.task_id: [is_success(r) for r in o.rewards] for o in outcomes}),
        strict_pass_hat=pass_hat_ks({o.task_id: o.strict for o in outcomes}),
        avg_reward=sum(rewards) / len(rewards) if rewards else 0.0)


def chunk_name(split: str, model_version: str, user: str, trials: int, max_tasks: int | None,
               task_ids: Sequence[str] | None = None, tasks_sha256: str = "") -> str:
    """The chunk of one evaluation; ``tasks_sha256``: a folder's tasks (the package's keep the names they had)."""
    ids = ",".join(sorted(task_ids)) if task_ids is not None else "*"
    tasks = f"/{tasks_sha256}" if tasks_sha256 else ""
    key = hashlib.sha256(f"{model_version}/{user}/{trials}/{max_tasks}/{ids}{tasks}".encode()).hexdigest()[:10]
    return f"official-{split}-{key}"


def _id(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:16]


def evaluate_official(store: Store, agent: TaskAgent, user: UserSim, *, run_id: str, round: int, env: Domain,
                      split: str, model_version: str, trials: int = 1, max_tasks: int | None = None,
                      task_ids: Sequence[str] | None = None, max_steps: int = 40, emit: Emit | None = None,
                      on_task: Callable[[TaskOutcome], None] | None = None,
                      tasks_path: str | Path | None = None) -> OfficialResult:
    """Every task of the split, ``trials`` times each; rows written as one chunk (replaced when run again).

    ``emit``: a ``StageEvent`` per task (stage ``evaluate official:<split>``); ``on_task``: each task's outcome;
    ``tasks_path``: the tasks of that tau2 data folder instead of the package's (``official_domain``).
    """
    if trials < 1:
        raise ValueError(f"trials: {trials} (at least 1)")
    dom, domain = official_domain(env, tasks_path), env.name
    tasks, source = official_tasks(dom, split, max_tasks, task_ids), dom.task_set()
    task_set = task_set_name(split)
    chunk = chunk_name(split, model_version, user.label, trials, max_tasks, task_ids,
                       source.tasks_sha256 if tasks_path is not None else "")
    evaluations: list[Evaluation] = []
    trajectories: list[Trajectory] = []
    producer = "llm_agent" if getattr(agent, "name", "") == "openai_compatible" else "learner"
    for n, task in enumerate(tasks):
        t0, mine = time.monotonic(), []
        for trial in range(trials):
            msgs, termination = converse(agent, dom, task, user.for_task(dom, task, trial), max_steps)
            outcome = run_checks(dom, task, msgs, termination=termination)
            tid = "of-" + _id(run_id, round, chunk, task.id, trial)[:12]  # the chunk names agent, user, trials
            trajectories.append(Trajectory(run_id=run_id, round=round, trajectory_id=tid, task_id=task.id,
                                           messages=msgs, producer=producer, model_version=model_version,
                                           termination=termination))
            mine.append(Evaluation(
                run_id=run_id, round=round, evaluation_id=_id(run_id, round, chunk, task.id, trial),
                task_id=task.id, trajectory_id=tid, model_version=model_version, task_set=task_set,
                success=outcome.passed, reward=outcome.reward, trial=trial,
                num_steps=sum(1 for m in msgs if m.role == "assistant"),
                failed_checks=[c.name for c in outcome.checks if not c.passed and not c.skipped]))
        evaluations += mine
        if on_task is not None:
            on_task(TaskOutcome(task_id=task.id, rewards=[e.reward for e in mine], strict=[e.success for e in mine],
                                failed_checks=[e.failed_checks for e in mine]))
        if emit is not None:  # the detail: the share of trials with reward 1 so far (pass^1 once all are in)
            ok, all_ok = sum(is_success(e.reward) for e in mine), sum(is_success(e.reward) for e in evaluations)
            so_far = "" if n + 1 == len(tasks) else f" of {len(tasks)} so far"
            emit(StageEvent(run_id=run_id, round=round, stage=f"evaluate {task_set}", done=len(mine), kept=ok,
                            rejected={"reward below 1": len(mine) - ok} if ok < len(mine) else {},
                            total=len(tasks) * trials, seconds=time.monotonic() - t0,
                            detail=f"pass^1 {all_ok / len(evaluations):.2f} on {n + 1}{so_far} tasks x {trials}"))
    if evaluations:
        store.write(trajectories, chunk)
        store.write(evaluations, chunk)
    return result_of(evaluations, run_id=run_id, round=round, domain=domain, split=split, trials=trials,
                     model_version=model_version, user=user.label, chunk=chunk, task_source=source)
