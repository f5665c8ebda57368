"""Learning curve of the embedded learner on the fixed test set (default-prior cold-start data)."""
from __future__ import annotations

import time
from typing import Any


def run(store, domain: str, sizes: list[int], test_size: int, seed: int = 0) -> dict[str, Any]:
    from agents.learners.harness import evaluate, success_by_slice
    from envs.ontology import load_initial_space
    from envs.registry import get_domain
    from tasks.datasets import test_cases
    from tasks.learn import fit_embedded
    from tasks.synth import design_and_plan, synthesize_all

    cases = test_cases(store, domain, n=test_size)
    space = load_initial_space(domain, run_id="bench-learner")
    pool = design_and_plan(space, int(max(sizes) * 1.05) + 12, run_id="bench-learner", round=0, seed=seed)
    synthesize_all(space, pool.blueprints, domain, pool)
    trajectories = [c.final for c in pool.kept]
    curve = []
    for size in sizes:
        t0 = time.perf_counter()
        learner = fit_embedded(trajectories[:size], domain, seed)
        t1 = time.perf_counter()
        evals, _ = evaluate(learner, cases, get_domain(domain), run_id="bench-learner", round=0, task_set="test",
                            model_version=f"bench/{size}")
        t2 = time.perf_counter()
        by = success_by_slice(evals, "num_write")
        curve.append({"size": min(size, len(trajectories)), "success": sum(e.success for e in evals) / len(evals),
                      "by_num_write": {k: f"{s}/{n}" for k, (s, n) in by.items()},
                      "train_seconds": t1 - t0, "eval_seconds": t2 - t1})
    return {"domain": domain, "test_tasks": len(cases), "curve": curve}
