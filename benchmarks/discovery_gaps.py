"""Why a planted gap is (not) recovered: the planted bucket against the run's other coverage gaps.

For each reflection that could adopt a factor (rounds 1 .. R-1) of a feedback run, the round's trained model
is scored on an independent balanced sample, the domain's ``uniform`` test set (300 tasks by default, built
once per store; never read by synthesis or the Reflector, and used here only by the benchmark). Every
controllable property not yet in the space (neither in the space the run started from nor promoted since) is
then read two ways:

- coverage of each bucket in the run's verified data of rounds <= r (what the Reflector sees), and
- the learner's failure rate in that bucket on the balanced sample (what the Reflector cannot see with
  the few diagnostic tasks an under-covered bucket has).

A bucket is a *gap* when its coverage is below a fifth of a uniform share (the Reflector's coverage-gap
threshold, gap > 0.8) and the learner fails there more often than in the property's other buckets; gaps
rank by that excess. If the planted bucket is not the top gap, a Reflector that promotes where the learner
is weakest and least covered is right to choose another property first.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

GAP_SHARE = 0.2  # of a uniform share: the Reflector's ``coverage_gap > 0.8``


def _fail(rows: list[tuple[str, bool]], keep) -> tuple[int, float | None]:
    picked = [ok for b, ok in rows if keep(b)]
    return len(picked), (1 - sum(picked) / len(picked)) if picked else None


def gaps_at(coverage: dict[str, Counter], scored: dict[str, list[tuple[str, bool]]],
            buckets: dict[str, list[str]]) -> list[dict]:
    """Every gap bucket (coverage below GAP_SHARE of a uniform share, failing more than the rest of its
    property on the balanced sample), largest failure excess first."""
    out = []
    for prop, values in buckets.items():
        total = sum(coverage[prop].values()) or 1
        for b in values:
            share = coverage[prop][b] / total
            n, fail = _fail(scored[prop], lambda x: x == b)
            _, rest = _fail(scored[prop], lambda x: x != b)
            if share < GAP_SHARE / len(values) and fail is not None and rest is not None and fail > rest:
                out.append({"gap": f"{prop}={b}", "coverage": round(share, 4), "fail": round(fail, 4),
                            "fail_elsewhere": round(rest, 4), "excess": round(fail - rest, 4), "n": n})
    return sorted(out, key=lambda g: (-g["excess"], g["gap"]))


def diagnose(store, env: Domain, run_id: str, rounds: int, planted: str, promoted: list[dict], cases,
             cache: dict) -> list[dict]:
    """Per reflection round 1 .. rounds-1: the planted bucket's coverage, balanced-sample failure and rank
    among the gaps, and the gaps that out-rank it. ``cache``: scores per model fingerprint (arms that trained
    the same model, as every arm does in round 1, are scored once)."""
    from evosyn.agents.learners.harness import evaluate
    from evosyn.tasks.learn import load_round

    controllable = env.pack.controllable
    passed = [v for v in store.read_records("verdicts", run_id=run_id) if v.passed]
    # the space the run started from: its initial factors (``initial_factors``) are no gaps the Reflector can fill
    start = {f.key for s in store.read_records("spaces", run_id=run_id, round=0)[:1] for f in s.factors}
    out = []
    for r in range(1, rounds):
        learner = load_round(store, run_id, r)
        if learner.fingerprint not in cache:
            evs, _ = evaluate(learner, cases, env, run_id=f"diagnose-{run_id}", round=r, task_set="test_uniform",
                              model_version=learner.fingerprint, id_key=f"diagnose/{learner.fingerprint}")
            cache[learner.fingerprint] = {e.task_id: e.success for e in evs}
        success = cache[learner.fingerprint]
        in_space = start | {p["factor"] for p in promoted if p["round"] < r}
        buckets = {k: list(v) for k, v in controllable.items() if k not in in_space}
        verdicts = [v for v in passed if v.round <= r]
        coverage = {k: Counter((v.observed.get(k) or ["n/a"])[0] for v in verdicts) for k in buckets}
        scored = {k: [((c.gold_observed.get(k) or ["n/a"])[0], success[c.task.task_id]) for c in cases
                      if c.task.task_id in success] for k in buckets}
        gaps = gaps_at(coverage, scored, buckets)
        prop, _, bucket = planted.partition("=")
        total = (sum(coverage[prop].values()) or 1) if prop in coverage else 1
        n, fail = _fail(scored.get(prop, []), lambda x: x == bucket)
        _, rest = _fail(scored.get(prop, []), lambda x: x != bucket)
        rank = next((i + 1 for i, g in enumerate(gaps) if g["gap"] == planted), None)
        out.append({"round": r, "in_space": prop in in_space,
                    "planted": {"coverage": round(coverage[prop][bucket] / total, 4) if prop in coverage else None,
                                "fail": None if fail is None else round(fail, 4),
                                "fail_elsewhere": None if rest is None else round(rest, 4), "n": n},
                    "rank": rank, "gaps": len(gaps), "properties": sorted(buckets),
                    "outranked_by": [] if prop in in_space else gaps[:(rank - 1) if rank else len(gaps)]})
    return out


def summary_line(gap: str, per_seed: list[dict]) -> str:
    """``multi_item=yes: rank 4/6 (s0 r1), ...; out-ranked by interleaved=yes (5), money_moves=2+ (5)``."""
    ranks, beaten = [], Counter()
    for s in per_seed:
        for d in s.get("diagnosis", []):
            if d["in_space"]:
                continue
            ranks.append(f"{d['rank'] or '-'}/{d['gaps']} (s{s['seed']} r{d['round']})")
            beaten.update(g["gap"] for g in d["outranked_by"])
    top = ", ".join(f"{g} ({n})" for g, n in beaten.most_common(4))
    return f"{gap}: rank among gaps {', '.join(ranks)}" + (f"; out-ranked most by {top}" if top else "")


def attach(store, env: Domain, rows: list[dict], rounds: int, n: int, say=lambda s: None) -> dict[str, Any]:
    """Adds ``diagnosis`` to every evosyn seed row; returns the balanced sample's description."""
    from evosyn.tasks.testset import test_cases, test_set_run_id

    cases = test_cases(store, env, n=n, kind="uniform")
    cache: dict = {}
    for row in rows:
        if row["arm"] != "evosyn":
            continue
        for s in row["per_seed"]:
            s["diagnosis"] = diagnose(store, env, s["run_id"], rounds, row["gap"], s["promoted"], cases, cache)
        say(summary_line(row["gap"], row["per_seed"]))
    return {"set": test_set_run_id(env, n=n, kind="uniform"), "tasks": len(cases), "models_scored": len(cache)}
