"""Data and learning metrics (App. B.1, B.5, B.7, B.8, B.9, B.12) as pure functions.

A sample is the observed factors of one verified example (factor -> values),
re-derived from its realized ground-truth tool actions (envs/factors.py), never
the plan. Reference value sets V_k and interaction templates are fixed per
domain (envs/reference.py) and passed in, so every compared arm, seed and round
is measured against the same sets.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from typing import Mapping, Sequence

Sample = Mapping[str, Sequence[str]]
Reference = Mapping[str, Sequence[str]]
ORDINAL = ["0", "1", "2", "3-4", "5+"]


def _entropy(counts: Counter) -> float:
    """Shannon entropy in nats of the distribution the counts give (0 for no counts)."""
    # imported on use: scipy.stats is about 0.7 s of imports
    from scipy.stats import entropy

    return float(entropy(list(counts.values()))) if sum(counts.values()) else 0.0


def factor_coverage(samples: Sequence[Sample], reference: Reference) -> float:
    """Eq. 23: mean over factors of |O_k & V_k| / |V_k|."""
    if not reference:
        return 0.0
    seen = {k: {v for s in samples for v in s.get(k, [])} for k in reference}
    return sum(len(seen[k] & set(vs)) / len(vs) for k, vs in reference.items()) / len(reference)


def factor_balance(samples: Sequence[Sample], reference: Reference) -> float:
    """Eq. 24: mean over factors of H(p_k) / log |V_k| (p_k over the values of V_k; multi-valued samples
    count once per value)."""
    if not reference:
        return 0.0
    vals = []
    for k, vs in reference.items():
        counts = Counter(v for s in samples for v in s.get(k, []) if v in vs)
        vals.append(_entropy(counts) / math.log(len(vs)) if len(vs) > 1 else float(bool(counts)))
    return sum(vals) / len(vals)


def interaction_coverage(samples: Sequence[Sample], reference: Reference,
                         templates: Sequence[tuple[str, str]]) -> float:
    """Eq. 25: mean over templates (a, b) of |O_ab| / (|V_a| |V_b|)."""
    if not templates:
        return 0.0
    total = 0.0
    for a, b in templates:
        va, vb = set(reference[a]), set(reference[b])
        seen = {(x, y) for s in samples for x in s.get(a, []) for y in s.get(b, []) if x in va and y in vb}
        total += len(seen) / (len(va) * len(vb))
    return total / len(templates)


def trajectory_diversity(patterns: Sequence[str], union: set[str]) -> float:
    """Eq. 26: H(p_traj) / log |P_union|, P_union the patterns of all compared conditions."""
    missing = set(patterns) - set(union)
    if missing:
        raise ValueError(f"patterns {sorted(missing)[:3]} are not in the shared union; build the union "
                         "from every compared run")
    if len(union) < 2 or not patterns:
        return 0.0
    return _entropy(Counter(patterns)) / math.log(len(union))


def distinct_sequences(sequences: Sequence[tuple[str, ...]]) -> int:
    """B.9 structural support: distinct ground-truth tool-call sequences."""
    return len(set(sequences))


def size_matched_distinct(sequences: Sequence[tuple[str, ...]], n: int, draws: int = 200, seed: int = 0) -> float:
    """B.9: mean distinct sequences over ``draws`` seeded subsamples of exactly ``n`` examples."""
    if n >= len(sequences):
        return float(distinct_sequences(sequences))
    rng = random.Random(seed)
    return sum(len(set(rng.sample(list(sequences), n))) for _ in range(draws)) / draws


def controllability(pairs: Sequence[tuple[str, str]], order: Sequence[str] = ORDINAL,
                    unrealized: int = 0) -> dict[str, float]:
    """B.7: requested vs realized values of an ordinal factor (buckets in ``order``): exact match and Spearman rho.

    ``unrealized``: requests that never became a realized value (no task, no rollout): misses of the exact
    match, absent from the rank correlation. A realized value outside ``order`` is a miss, and unranked.
    """
    n = len(pairs) + unrealized
    if not n:
        return {"n": 0, "n_requested": 0, "n_realized": 0, "exact": float("nan"), "spearman": float("nan")}
    ranked = [(order.index(a), order.index(b)) for a, b in pairs if a in order and b in order]
    return {"n": n, "n_requested": n, "n_realized": len(pairs), "exact": sum(a == b for a, b in pairs) / n,
            "spearman": spearman([a for a, _ in ranked], [b for _, b in ranked])}


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman rho; NaN when undefined (fewer than 3 points or a constant side)."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(xs, ys).statistic)


def slice_shares(samples: Sequence[Sample], reference: Reference) -> dict[tuple[str, str], float]:
    """Share of samples showing each (factor, value) slice of the reference sets."""
    n = len(samples)
    return {(k, v): (sum(v in s.get(k, []) for s in samples) / n if n else 0.0)
            for k, vs in reference.items() for v in vs}


def slice_success(results: Sequence[tuple[Sample, bool]], reference: Reference,
                  min_n: int = 1) -> dict[tuple[str, str], float]:
    """Success rate per (factor, value) slice over evaluated tasks, for slices with >= min_n tasks."""
    out = {}
    for k, vs in reference.items():
        for v in vs:
            hits = [ok for obs, ok in results if v in obs.get(k, [])]
            if len(hits) >= min_n:
                out[(k, v)] = sum(hits) / len(hits)
    return out


def capability_transition(share_before: Mapping, share_after: Mapping, sr_before: Mapping, sr_after: Mapping,
                          overall_before: float, min_shift: float = 0.05) -> dict[str, float]:
    """B.5 / B.8 over one transition r-1 -> r, slice by slice.

    gap = 1 - SR_{r-1}; allocation shift = verified share in round r minus in round r-1;
    gain = SR_r - SR_{r-1} (slices evaluated at both). Targeted slices are upweighted
    (shift >= min_shift) and weak (SR_{r-1} below the overall SR_{r-1}); the targeted
    improvement rate is the fraction of them whose success rose.
    """
    shift = {s: share_after.get(s, 0.0) - share_before.get(s, 0.0) for s in set(share_before) | set(share_after)}
    gapped = sorted(s for s in sr_before if s in shift)
    both = sorted(s for s in gapped if s in sr_after)
    targeted = [s for s in both if shift[s] >= min_shift and sr_before[s] < overall_before]
    improved = [s for s in targeted if sr_after[s] > sr_before[s]]
    return {"slices": float(len(gapped)),
            "gap_allocation_spearman": spearman([1 - sr_before[s] for s in gapped], [shift[s] for s in gapped]),
            "allocation_gain_spearman": spearman([shift[s] for s in both], [sr_after[s] - sr_before[s] for s in both]),
            "targeted_slices": float(len(targeted)), "targeted_improved": float(len(improved)),
            "targeted_improvement_rate": len(improved) / len(targeted) if targeted else float("nan")}


def gain_per_1k(success_before: float, success_after: float, added_examples: int) -> float:
    """B.12: success change per 1,000 added verified training examples."""
    return (success_after - success_before) / (added_examples / 1000) if added_examples else float("nan")
