"""Our verifier vs tau2's own evaluator on the same trajectories (official gold actions).

Both are timed per task from a cold start for that task: our gold-replay cache
is cleared before each task, and tau2's evaluator is used unmodified (it loads
and hashes the domain DB for every evaluation). One warm-up call each is
excluded from the timings (imports).
"""
from __future__ import annotations

import time
from typing import Any


def run(domain: str | None = None, split: str = "base", limit: int | None = None) -> dict[str, Any]:
    import envs.replay as replay
    from envs.gold import gold_messages
    from envs.packs import default_domain, get_domain
    from envs.tau2.official_eval import tau2_reward
    from envs.verify import run_checks

    domain = domain or default_domain()
    dom = get_domain(domain)
    tasks = [t for t in dom.tasks(split) if t.evaluation_criteria and t.evaluation_criteria.actions]
    tasks = tasks[:limit] if limit else tasks
    trajectories = [(t, gold_messages(dom, t)) for t in tasks]
    run_checks(dom, *trajectories[0])
    tau2_reward(domain, *trajectories[0])

    ours, theirs, agree = [], [], 0
    for task, messages in trajectories:
        replay.gold_replay.cache_clear()
        t0 = time.perf_counter()
        outcome = run_checks(dom, task, messages)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        reward, _ = tau2_reward(domain, task, messages)
        theirs.append(time.perf_counter() - t0)
        agree += reward == outcome.reward
    ours_s, theirs_s = sum(ours) / len(ours), sum(theirs) / len(theirs)
    return {"domain": domain, "split": split, "tasks": len(tasks), "agreeing_rewards": agree,
            "ours_s_per_task": ours_s, "tau2_s_per_task": theirs_s, "speedup": theirs_s / ours_s}


def rows(result: dict[str, Any]) -> list[list[str]]:
    return [["evosyn verifier", f"{result['ours_s_per_task'] * 1000:.2f} ms", "1.0x"],
            ["tau2 evaluator", f"{result['tau2_s_per_task'] * 1000:.1f} ms", f"{result['speedup']:.0f}x slower"]]
