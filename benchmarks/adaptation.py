"""Within-space adaptation (App. B.9-B.12): did the slices a round's data was steered to improve more?

Per run, shared test set and round r >= 2, over the slices of the set (one value of one observed factor of its
tasks, as in ``evosyn.benchmarks.learning_slices``, each with at least ``MIN_TASKS`` tasks):

- a slice's **allocation gain**: its share of round r's verified data minus its share of round r-1's (the data's
  observed values, so every arm is read the same way, whatever its Designer named);
- its **success gap**: the round r-1 learner's success on the whole set minus its success on the slice (what
  the feedback that steered round r saw: positive where the learner is weaker);
- **gap-allocation Spearman**: the rank correlation of the two over the slices (positive: more data went where
  the learner was weaker);
- **targeted improvement rate**: among the targeted slices (allocation gain > 0), the share whose success rose
  from round r-1 to r by more than the untargeted slices' mean rise (None without both kinds).

Per arm and round the benchmark reports the mean over seeds and the seeds' range. A run's own round metrics
(``evosyn.tasks.metrics.transition``, B.5 / B.8) read the same correlation on the run's diagnostic set, whose tasks each
arm drew itself; here every arm is read on the shared test sets, and the targeted slices are compared with the
untargeted ones rather than with zero (every slice rises as the data grows).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from evosyn.benchmarks.learning_slices import SKIP
from evosyn.storage.metrics import spearman

MIN_TASKS = 5  # a slice of fewer test tasks has no success rate worth ranking


def _value(values: list[str]) -> str:
    """A task's value of a factor as one slice name, as ``evosyn.benchmarks.learning_slices`` names it."""
    return "+".join(values) if values else "-"


def allocation(store, run_id: str) -> dict[int, dict[tuple[str, str], float]]:
    """round -> (factor, value) -> share of that round's verified tasks (their observed values)."""
    counts: dict[int, Counter] = {}
    totals: Counter = Counter()
    for v in store.read_fields("verdicts", ["round", "passed", "observed"], run_id=run_id):
        if not v["passed"]:
            continue
        totals[v["round"]] += 1
        c = counts.setdefault(v["round"], Counter())
        for factor, values in v["observed"].items():
            if factor not in SKIP:
                c[(factor, _value(values))] += 1
    return {r: {k: n / totals[r] for k, n in c.items()} for r, c in counts.items()}


def _slices(tasks: list[str], observed: dict[str, dict]) -> dict[tuple[str, str], list[str]]:
    groups: dict[tuple[str, str], list[str]] = {}
    for t in tasks:
        for factor, values in observed.get(t, {}).items():
            if factor not in SKIP:
                groups.setdefault((factor, _value(values)), []).append(t)
    return {k: ts for k, ts in groups.items() if len(ts) >= MIN_TASKS}


def run_adaptation(run: dict) -> list[dict]:
    """The rows of one run (``evosyn.benchmarks.learning.collect``'s, with ``_allocation``): per set and round >= 2."""
    out = []
    alloc = run.get("_allocation", {})
    for set_name in sorted({k[0] for k in run["_outcomes"]}):
        rounds = sorted(r for s, r in run["_outcomes"] if s == set_name)
        for prev, r in zip(rounds, rounds[1:]):
            if prev not in alloc or r not in alloc:
                continue
            before, after = run["_outcomes"][(set_name, prev)], run["_outcomes"][(set_name, r)]
            tasks = sorted(set(before) & set(after))
            groups = _slices(tasks, run.get("_observed", {}).get(set_name, {}))
            if len(groups) < 3:
                continue
            overall = float(np.mean([before[t] for t in tasks]))
            gain, gap, rise = [], [], []
            for key, ts in sorted(groups.items()):
                gain.append(alloc[r].get(key, 0.0) - alloc[prev].get(key, 0.0))
                gap.append(overall - float(np.mean([before[t] for t in ts])))
                rise.append(float(np.mean([after[t] for t in ts])) - float(np.mean([before[t] for t in ts])))
            out.append({"set": set_name, "round": r, "slices": len(groups),
                        "spearman": spearman(gain, gap), "targeted": sum(g > 0 for g in gain),
                        "targeted_improvement_rate": _improvement_rate(gain, rise)})
    return out


def _improvement_rate(gain: list[float], rise: list[float]) -> float | None:
    targeted = [d for g, d in zip(gain, rise) if g > 0]
    untargeted = [d for g, d in zip(gain, rise) if g <= 0]
    if not targeted or not untargeted:
        return None
    bar = float(np.mean(untargeted))
    return sum(d > bar for d in targeted) / len(targeted)


def adaptation(runs: list[dict], arms: list[str]) -> list[dict]:
    """Per arm, set and round: the mean over seeds of the two measures, with the seeds' range and count."""
    rows = [{"arm": r["arm"], "seed": r["seed"], **x} for r in runs for x in run_adaptation(r)]
    out = []
    for arm in arms:
        for key in sorted({(x["set"], x["round"]) for x in rows if x["arm"] == arm}):
            these = [x for x in rows if x["arm"] == arm and (x["set"], x["round"]) == key]
            rho = [x["spearman"] for x in these if not np.isnan(x["spearman"])]
            rate = [x["targeted_improvement_rate"] for x in these if x["targeted_improvement_rate"] is not None]
            out.append({"arm": arm, "set": key[0], "round": key[1], "seeds": len(these),
                        "slices": int(np.mean([x["slices"] for x in these])),
                        "spearman": float(np.mean(rho)) if rho else float("nan"),
                        "spearman_range": [min(rho), max(rho)] if rho else None,
                        "targeted_improvement_rate": float(np.mean(rate)) if rate else None,
                        "rate_range": [min(rate), max(rate)] if rate else None,
                        "per_seed": {str(x["seed"]): {"spearman": x["spearman"], "targeted": x["targeted"],
                                                      "targeted_improvement_rate": x["targeted_improvement_rate"]}
                                     for x in these}})
    return out

