"""Intrinsic data metrics (App. B.1, B.7, B.9) over verified samples read from the store.

A sample is (requested selection, observed factors). Reference value sets come
from the initial space, so runs whose spaces evolved stay comparable.
"""
from __future__ import annotations

import math
from collections import Counter
from itertools import combinations
from typing import Sequence

from scipy.stats import spearmanr

Selection = dict[str, list[str]]
ORDINAL = ["0", "1", "2", "3-4", "5+"]


def _entropy(counts: Counter) -> float:
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values() if c) if n else 0.0


def factor_coverage(samples: Sequence[Selection], reference: dict[str, list[str]]) -> float:
    if not reference:
        return 0.0
    seen = {k: {v for s in samples for v in s.get(k, [])} for k in reference}
    return sum(len(seen[k] & set(vs)) / len(vs) for k, vs in reference.items()) / len(reference)


def factor_balance(samples: Sequence[Selection], reference: dict[str, list[str]]) -> float:
    vals = []
    for k, vs in reference.items():
        counts = Counter(v for s in samples for v in s.get(k, []) if v in vs)
        vals.append(_entropy(counts) / math.log(len(vs)) if len(vs) > 1 else 1.0)
    return sum(vals) / len(vals) if vals else 0.0


def interaction_coverage(samples: Sequence[Selection], reference: dict[str, list[str]]) -> float:
    pairs = list(combinations(sorted(reference), 2))
    if not pairs:
        return 0.0
    total = 0.0
    for a, b in pairs:
        seen = {(x, y) for s in samples for x in s.get(a, []) for y in s.get(b, [])
                if x in reference[a] and y in reference[b]}
        total += len(seen) / (len(reference[a]) * len(reference[b]))
    return total / len(pairs)


def trajectory_diversity(patterns: Sequence[str], union: set[str]) -> float:
    """Entropy of trajectory patterns, normalized by log |union of patterns across compared runs|."""
    if len(union) < 2 or not patterns:
        return 0.0
    return _entropy(Counter(patterns)) / math.log(len(union))


def distinct_sequences(sequences: Sequence[tuple[str, ...]], size: int | None = None) -> int:
    return len(set(sequences[:size] if size is not None else sequences))


def controllability(pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Requested vs realized values of an ordinal factor: exact match and Spearman rho."""
    if not pairs:
        return {"n": 0, "exact": 0.0, "spearman": 0.0}
    req = [ORDINAL.index(a) for a, _ in pairs]
    real = [ORDINAL.index(b) for _, b in pairs]
    rho = spearmanr(req, real).statistic if len(set(req)) > 1 and len(set(real)) > 1 else float("nan")
    return {"n": len(pairs), "exact": sum(a == b for a, b in zip(req, real)) / len(pairs), "spearman": float(rho)}


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return float("nan")
    return float(spearmanr(xs, ys).statistic)
