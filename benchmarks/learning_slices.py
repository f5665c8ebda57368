"""Where two arms' success differs: the last round's paired difference per slice of a shared test set.

A slice is the test tasks with one value of one observed factor (the verifier's reading of the task's gold
trajectory: ``num_write=3-4``, ``multi_item=yes``, ...). Per set, factor, value and other arm it gives the
slice's size, each arm's success on it (mean over seeds and the slice's tasks), the paired difference
``evosyn - arm`` with its two-level bootstrap interval (``evosyn.benchmarks.bootstrap.paired`` on the slice's
columns) and the difference's share of the whole set's difference (``difference x tasks / set size``; the
shares of one factor's values add up to the set's difference). It also lists the slices that no arm solves
a single task of in any round: what no steering of the data can move, for this learner.

The rows read the runs ``evosyn.benchmarks.learning.collect`` returns: their ``_outcomes`` and ``_observed``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from evosyn.benchmarks.bootstrap import RESAMPLES, paired

SKIP = ("trajectory_pattern", "tool_use_pattern")  # one value per task: a slice of one task says nothing


def _value(values: list[str]) -> str:
    """A task's value of a factor as one slice name (a factor with several values: joined)."""
    return "+".join(values) if values else "-"


def common_tasks(runs: list[dict], key: tuple[str, int]) -> list[str]:
    """The tasks of (set, round) ``key`` that every run evaluated there."""
    have = [r for r in runs if key in r["_outcomes"]]
    return sorted(set.intersection(*(set(r["_outcomes"][key]) for r in have))) if have else []


def _mean(rs: list[dict], key: tuple[str, int], tasks: list[str]) -> float:
    return float(np.mean([[r["_outcomes"][key][t] for t in tasks] for r in rs]))


def _never_solved(runs: list[dict], set_name: str, tasks: list[str]) -> bool:
    """No run solves any of ``tasks`` in any round it was evaluated on ``set_name``."""
    return not any(r["_outcomes"][k].get(t, 0.0) > 0 for r in runs for k in r["_outcomes"]
                   if k[0] == set_name for t in tasks)


def slices(runs: list[dict], arms: list[str], baseline: str, resamples: int = RESAMPLES,
           seed: int = 0) -> dict[str, Any]:
    """``rows``: one per (set, factor, value, other arm) at the last round every set was evaluated in;
    ``unsolved``: (set, factor, value, tasks) of the slices no arm solves in any round."""
    rows, unsolved = [], []
    for set_name in sorted({k[0] for r in runs for k in r["_outcomes"]}):
        last = max(k[1] for r in runs for k in r["_outcomes"] if k[0] == set_name)
        key = (set_name, last)
        tasks = common_tasks(runs, key)
        observed = {}
        for r in runs:
            observed.update(r.get("_observed", {}).get(set_name, {}))
        if not tasks or not observed:
            continue
        by_arm = {a: sorted((r for r in runs if r["arm"] == a and key in r["_outcomes"]), key=lambda r: r["seed"])
                  for a in arms}
        factors = sorted({f for t in tasks for f in observed.get(t, {})} - set(SKIP))
        for factor in factors:
            groups: dict[str, list[int]] = {}
            for i, t in enumerate(tasks):
                groups.setdefault(_value(observed.get(t, {}).get(factor, [])), []).append(i)
            if len(groups) < 2:
                continue
            for value, idx in sorted(groups.items()):
                cols = [tasks[i] for i in idx]
                if _never_solved(runs, set_name, cols):
                    unsolved.append({"set": set_name, "factor": factor, "value": value, "n_tasks": len(idx),
                                     "share": len(idx) / len(tasks)})
                success = {a: _mean(rs, key, cols) for a, rs in by_arm.items() if rs}
                for other in [a for a in arms if a != baseline and by_arm.get(a) and by_arm.get(baseline)]:
                    seeds = sorted({r["seed"] for r in by_arm[baseline]} & {r["seed"] for r in by_arm[other]})
                    if not seeds:
                        continue
                    a, b = ([[r["_outcomes"][key][t] for t in cols] for r in by_arm[x] if r["seed"] in seeds]
                            for x in (baseline, other))
                    d = paired(np.array(a), np.array(b), resamples, seed)
                    rows.append({"set": set_name, "round": last, "factor": factor, "value": value,
                                 "n_tasks": len(idx), "a": baseline, "b": other, "success": success,
                                 "mean": d["mean"], "lo": d["lo"], "hi": d["hi"],
                                 "contribution": d["mean"] * len(idx) / len(tasks)})
    return {"rows": rows, "unsolved": unsolved}


def largest(rows: list[dict], most: int = 6) -> list[dict]:
    """Per (set, other arm), the ``most`` slices whose difference weighs most in the set's difference."""
    out = []
    for group in dict.fromkeys((r["set"], r["b"]) for r in rows):
        these = [r for r in rows if (r["set"], r["b"]) == group]
        out += sorted(these, key=lambda r: (-abs(r["contribution"]), r["factor"], r["value"]))[:most]
    return out
