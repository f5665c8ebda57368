"""`evosyn bench served`: a served learner with a planted weakness (``benchmarks/served_agent.py``), and whether the
Reflector adopts the property behind it.

The scripted agent replays the teacher's solution but never makes a second write in a conversation, so it fails
exactly the tasks with two or more writes (``num_write`` in 2, 3-4, 5+). The evosyn arm and the no_feedback control
run against it (``learner: served`` with ``train: none``: the same agent every round) on the same seeds
(``benchmarks/learning.py``'s runner: same config but the arm, stop rule off), and per arm we count the seeds in which
``num_write`` is adopted, as ``bench discovery`` counts it (``discovery.adoption``: promoted by a reflection of rounds
1 .. R-1). The acceptance: evosyn in at least 2 of 3 seeds, the control in at most 1 of 3.

Beside the counts: the served agent's success per ``num_write`` bucket over every evaluation of the runs (that the
weakness held where the runs measured it), and the conversations the agent could not place (``misses``: none when
it saw every task the runs wrote before evaluating).
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from evosyn.benchmarks.discovery import adoption
from evosyn.benchmarks.learning import Plan, launch
from evosyn.benchmarks.served_agent import PROPERTY, WEAK_BUCKETS, serve

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

ARMS = ["evosyn", "no_feedback"]
MODEL = "planted-weakness"


def success_by_bucket(store, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``num_write`` bucket -> the served agent's evaluations there and their successes, over the runs."""
    out: dict[str, dict[str, Any]] = {}
    for rid in run_ids:
        for e in store.read_fields("evaluations", ["success", "observed"], run_id=rid):
            for bucket in (e["observed"] or {}).get(PROPERTY, []):
                cell = out.setdefault(bucket, {"evaluations": 0, "passed": 0})
                cell["evaluations"] += 1
                cell["passed"] += int(e["success"])
    return {b: {**c, "success": c["passed"] / c["evaluations"]} for b, c in sorted(out.items())}


def adoption_lines(result: dict) -> list[list]:
    """One row per arm: adopted seeds, per seed the round and rule, every factor each seed promoted (round)."""
    return [[r["arm"], f"{r['recovered']}/{r['seeds']}",
             " ".join(f"s{s['seed']}:" + (f"r{s['round']} {s['rule']}" if s["recovered"] else "-")
                      for s in r["per_seed"]),
             " | ".join(",".join(f"{p['factor']}({p['round']})" for p in s["promoted"]) or "-" for s in r["per_seed"])]
            for r in result["rows"]]


def bucket_lines(result: dict) -> list[list]:
    return [[b, c["evaluations"], f"{c['success']:.3f}", "yes" if b in result["weak_buckets"] else "no"]
            for b, c in result["success_by_bucket"].items()]


def bench(env: Domain, seeds: list[int], home, *, rounds: int = 3, budget: int = 150, test_size: int = 20,
          probe_size: int | None = None, jobs: int = 2, max_concurrency: int = 4, max_steps: int = 40,
          say=lambda s: None) -> dict[str, Any]:
    """``probe_size``: the runs' (None: their default for a served learner, recorded as the number it is)."""
    from evosyn.config import default_probe_size
    from evosyn.storage.store import Store

    if probe_size is None:
        probe_size = default_probe_size(budget, "served")
    t0 = time.perf_counter()
    store = Store(home)
    server, agent = serve(store, env)
    try:
        # the endpoint is in each run's config (and so its id): a rerun serves on another port and runs afresh
        served = {"base_url": server.base_url, "model": MODEL, "max_concurrency": max_concurrency,
                  "max_steps": max_steps, "train": "none"}
        plan = Plan(domain=env.name, seeds=seeds, home=home, arms=ARMS, rounds=rounds, budget=budget,
                    test_size=test_size, jobs=jobs, extra={"learner": "served", "served": served,
                                                           "probe_size": probe_size}, name="served")
        say(f"served agent on {server.base_url}: fails every task with {PROPERTY} in {', '.join(WEAK_BUCKETS)}")
        launched, cpu = launch(plan, say)
        requests = server.stats()["requests"]
    finally:
        server.stop()
    store = Store(home, create=False)
    rows = adoption(store, launched, ARMS, PROPERTY, rounds)
    n = len(seeds)
    need, allow = math.ceil(2 * n / 3), math.floor(n / 3)  # bench discovery's acceptance: 2 of 3, at most 1 of 3
    by_arm = {r["arm"]: r["recovered"] for r in rows}
    return {"domain": env.name, "seeds": seeds, "rounds": rounds, "budget": budget, "test_size": test_size,
            "probe_size": probe_size, "jobs": jobs, "max_concurrency": max_concurrency, "max_steps": max_steps,
            "property": PROPERTY, "weak_buckets": list(WEAK_BUCKETS), "rows": rows,
            "target": {"evosyn_at_least": need, "no_feedback_at_most": allow},
            "met": by_arm["evosyn"] >= need and by_arm["no_feedback"] <= allow,
            "success_by_bucket": success_by_bucket(store, [j.run_id for j in launched]),
            "agent": {**agent.stats(), "requests": requests},
            "runs_launched": sum(not j.reused for j in launched), "runs_reused": sum(j.reused for j in launched),
            "wall_s": time.perf_counter() - t0, "cpu_s": cpu}
