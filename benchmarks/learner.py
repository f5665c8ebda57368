"""Learning curve of the embedded learner on the fixed test set (default-prior cold-start data).

Each point of the curve trains on a prefix of one seeded shuffle of the pool: the
pool comes ordered by direction (by task family), so an unshuffled prefix would
hold only the first families and the curve would measure the pool's order, not
how much data the learner needs.
"""
from __future__ import annotations

import random
import resource
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evosyn.envs.base import Domain


def pool(store, env: Domain, name: str, budget: int, seed: int, space=None, steering=None):
    """A synthesis pass (the pipeline's stages) of ``budget`` blueprints in run ``<name>-<domain>-s<seed>-n<budget>``:
    built once per store, read back by a rerun of the benchmark."""
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass

    run_id = f"{name}-{env.name}-s{seed}-n{budget}"
    ctx = Ctx(store, run_id, 0, seed, env)
    space = (space or load_initial_space(ctx.pack, run_id=run_id)).model_copy(update={"run_id": run_id})
    return run_pass(ctx, space, steering or ColdStart(), budget)


def run(store, env: Domain, sizes: list[int], test_size: int, seed: int = 0, cases=None) -> dict[str, Any]:
    """``cases``: the test set, when the caller has read it already (else read here)."""
    from evosyn.agents.learners.harness import evaluate, success_by_slice
    from evosyn.tasks.datasets import with_policy
    from evosyn.tasks.learn import fit_embedded
    from evosyn.tasks.testset import test_cases

    cases = cases if cases is not None else test_cases(store, env, n=test_size)
    kept = pool(store, env, "bench-learner", int(max(sizes) * 1.05) + 12, seed).kept
    trajectories = [with_policy(env, c.task, c.trajectory) for c in kept]  # each with its agent's system prompt
    random.Random(seed).shuffle(trajectories)  # the pool is in family order: a prefix would miss families
    curve = []
    for size in sizes:
        train = trajectories[:size]
        t0, c0 = time.perf_counter(), time.process_time()
        learner = fit_embedded(train, env, seed)
        t1, c1 = time.perf_counter(), time.process_time()
        evals, _ = evaluate(learner, cases, env, run_id="bench-learner", round=0, task_set="test",
                            model_version=f"bench/{size}")
        t2, c2 = time.perf_counter(), time.process_time()
        by = success_by_slice(evals, "num_write")
        curve.append({"size": len(train), "success": sum(e.success for e in evals) / len(evals),
                      "by_num_write": {k: f"{s}/{n}" for k, (s, n) in by.items()},
                      "train_seconds": t1 - t0, "eval_seconds": t2 - t1,
                      # CPU time (this process): the figures the acceptance lines are in, robust to a shared machine
                      "train_cpu_seconds": c1 - c0, "eval_cpu_seconds": c2 - c1,
                      "train_cpu_ms_per_trajectory": 1000 * (c1 - c0) / len(train) if train else None,
                      # where the fit's CPU went (agents/learners/fitclock.py); the rest of train_cpu_seconds is
                      # reading the tool schemas and the collector's pause
                      "train_cpu_by_phase": dict(learner.fit_cpu),
                      # the sgd phase model by model: rows, stored nonzeros, classes, CPU seconds
                      "train_sgd_by_model": dict(learner.fit_cpu.models),
                      "eval_cpu_ms_per_task": 1000 * (c2 - c1) / len(cases),
                      # this process's peak resident memory so far (sizes grow: the largest fit's peak, or an
                      # earlier step's when that was higher), in MiB; Linux reports ru_maxrss in KiB
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    largest = max(curve, key=lambda r: r["size"])
    return {"domain": env.name, "test_tasks": len(cases), "seed": seed, "pool": len(trajectories), "curve": curve,
            "largest": {"size": largest["size"], "train_cpu_seconds": largest["train_cpu_seconds"],
                        "train_cpu_by_phase": largest["train_cpu_by_phase"],
                        "train_sgd_by_model": largest["train_sgd_by_model"],
                        "train_cpu_ms_per_trajectory": largest["train_cpu_ms_per_trajectory"],
                        "eval_cpu_ms_per_task": largest["eval_cpu_ms_per_task"],
                        "peak_rss_mib": max(r["peak_rss_mib"] for r in curve)}}


MULTI = ("3-4", "5+")


def multi_write_ablation(store, env: Domain, size: int, test_size: int, seed: int = 0) -> dict[str, Any]:
    """Does the learner's skill on 3+ write tasks come from its training data?

    Two training sets of the same size from one pool whose write count is drawn
    uniformly: one keeps only tasks with at most one write, the other keeps the
    pool as drawn. Both are evaluated on the fixed test set.
    """
    from evosyn.agents.designer import NewFactor
    from evosyn.agents.learners.harness import evaluate, success_by_slice
    from evosyn.envs.ontology import load_initial_space
    from evosyn.tasks.datasets import with_count_factors, with_policy
    from evosyn.tasks.learn import fit_embedded
    from evosyn.tasks.testset import test_cases

    cases = test_cases(store, env, n=test_size)
    space = with_count_factors(load_initial_space(env.pack, run_id="bench-ablation"), ("num_write",))
    drawn = pool(store, env, "bench-ablation", int(size * 3.2), seed, space, NewFactor(factor="num_write"))
    kept = [(with_policy(env, c.task, c.trajectory), c.verdict.observed.get("num_write", ["0"])[0]) for c in drawn.kept]
    random.Random(seed).shuffle(kept)  # one shuffle: the arms below are drawn from it in the same order
    multi = {t.trajectory_id for t, nw in kept if nw not in ("0", "1")}
    single = [t for t, nw in kept if nw in ("0", "1")]
    size = min(size, len(single))  # both arms the same size, so only their make-up differs
    arms = {"without multi-write": single[:size], "with multi-write": [t for t, _ in kept][:size]}
    out = []
    for name, trajectories in arms.items():
        learner = fit_embedded(trajectories, env, seed)
        evals, _ = evaluate(learner, cases, env, run_id="bench-ablation", round=0, task_set="test",
                            model_version=f"ablation/{name}")
        by = success_by_slice(evals, "num_write")
        hits, total = (sum(by.get(b, (0, 0))[i] for b in MULTI) for i in (0, 1))
        out.append({"train": name, "size": len(trajectories),
                    "multi_write_share": sum(t.trajectory_id in multi for t in trajectories) / max(len(trajectories), 1),
                    "success": sum(e.success for e in evals) / len(evals),
                    "success_3plus_writes": hits / total if total else 0.0, "tasks_3plus_writes": total,
                    "by_num_write": {k: f"{s}/{n}" for k, (s, n) in by.items()}})
    return {"domain": env.name, "test_tasks": len(cases), "ablation": out}
