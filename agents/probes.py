"""Diagnostic probes: measurable trajectory properties, and the information they carry about failure.

A probe buckets a task by a property of its gold (verified teacher) solution.
The catalog is domain-generic: every trajectory property of ``envs/properties.py``
(read from the task's observed factors, which the verifier measured on the
replay) plus a few of the gold conversation itself (turns, transfers, derived
numeric arguments, call order, kind of state change). For each probe we report
failure rate and coverage per bucket and
  I(Y_fail; d | O_r)   conditional mutual information given the current space's
                       stratum (task family x outcome x difficulty), App. B.10,
                       with a permutation-test p-value (failures shuffled within strata);
  NMI(d, g)            normalized mutual information with tool-count tertiles g;
  I(Y_fail; d | g)     residual failure information beyond tool count, App. B.11.
All in nats, plug-in estimates.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import numpy as np

from evosyn.envs.properties import PROPERTIES
from evosyn.storage.records import Message, Probe

# scipy.stats and sklearn.metrics (about 1.1 s of imports together) are imported where they are used: a command
# that builds the roles (synth, the first stages of a run) never needs them before its first reflection.


@dataclass
class TaskProfile:
    """What the probes need about one task: its gold solution and its space stratum."""

    task_id: str
    observed: dict[str, list[str]]
    stratum: tuple[str, ...]
    gold: list[Message]


def _calls(p: TaskProfile) -> list:
    return [c for m in p.gold for c in m.tool_calls]


def _turns(p: TaskProfile) -> str:
    n = sum(1 for m in p.gold if m.role == "assistant")
    return "<=6" if n <= 6 else "7-12" if n <= 12 else "13+"


def _observed(key: str, default: str) -> Callable[[TaskProfile], str]:
    return lambda p: (p.observed.get(key) or [default])[0]


# name -> (TaskProfile -> bucket, buckets; [] = the values seen)
PROBES: dict[str, tuple[Callable[[TaskProfile], str], list[str]]] = {
    **{k: (_observed(k, "n/a"), list(prop.values)) for k, prop in PROPERTIES.items()},
    "turns": (_turns, ["<=6", "7-12", "13+"]),
    "transfers": (lambda p: "yes" if any(c.name == "transfer_to_human_agents" for c in _calls(p)) else "no",
                  ["no", "yes"]),
    "numeric_arguments": (_observed("computation", "none"), ["none", "required"]),
    "order_pattern": (_observed("trajectory_pattern", "none"), []),
    "state_change_type": (_observed("state_change_type", "none"), []),  # the pack's kinds
}


def coarsen(strata: Sequence[tuple], min_size: int = 5) -> list[tuple]:
    """Each stratum cut to its longest prefix that at least ``min_size`` tasks share (the empty prefix pools the
    rest): a stratum of one task carries no information about failure, and the permutation test cannot move it."""
    counts: Counter = Counter(s[:n] for s in strata for n in range(len(s) + 1))
    return [next((s[:n] for n in range(len(s), 0, -1) if counts[s[:n]] >= min_size), ()) for s in strata]


def tool_count_tertiles(profiles: Sequence[TaskProfile]) -> dict[str, str]:
    counts = sorted(len(_calls(p)) for p in profiles)
    if not counts:
        return {}
    lo, hi = counts[len(counts) // 3], counts[2 * len(counts) // 3]
    return {p.task_id: ("low" if len(_calls(p)) <= lo else "mid" if len(_calls(p)) <= hi else "high")
            for p in profiles}


def _codes(xs: Sequence[Hashable]) -> list[int]:
    """Labels as integers: sklearn wants a 1-D array, and a label may be a tuple (a stratum)."""
    index: dict[Hashable, int] = {}
    return [index.setdefault(x, len(index)) for x in xs]


def entropy(xs: Sequence[Hashable]) -> float:
    from scipy.stats import entropy as scipy_entropy

    return float(scipy_entropy(list(Counter(xs).values()))) if len(xs) else 0.0


def mutual_information(xs: Sequence[Hashable], ys: Sequence[Hashable]) -> float:
    from sklearn.metrics import mutual_info_score

    return float(mutual_info_score(_codes(xs), _codes(ys))) if len(xs) else 0.0


def conditional_mi(xs: Sequence[Hashable], ys: Sequence[Hashable], zs: Sequence[Hashable]) -> float:
    """I(X; Y | Z) = sum_z p(z) I(X; Y | Z = z), plug-in, in nats."""
    if not len(xs):
        return 0.0
    x, y, z = (np.asarray(_codes(v)) for v in (xs, ys, zs))
    return float(_cmi(x, y[None, :], z)[0])


def _cmi(x: np.ndarray, ys: np.ndarray, z: np.ndarray) -> np.ndarray:
    """I(X; Y_b | Z) for each row b of ``ys`` (integer codes), vectorized over rows."""
    n = x.size
    nx, ny, nz = int(x.max()) + 1, int(ys.max()) + 1, int(z.max()) + 1
    b = ys.shape[0]
    cell = (z * nx + x)[None, :] * ny + ys + (np.arange(b) * nz * nx * ny)[:, None]
    joint = np.bincount(cell.ravel(), minlength=b * nz * nx * ny).reshape(b, nz, nx, ny).astype(float)
    n_zx = joint.sum(axis=3, keepdims=True)
    n_zy = joint.sum(axis=2, keepdims=True)
    n_z = joint.sum(axis=(2, 3), keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(joint > 0, joint / n * np.log(joint * n_z / (n_zx * n_zy)), 0.0)
    return np.maximum(terms.sum(axis=(1, 2, 3)), 0.0)


def permutation_p(xs: Sequence[Hashable], ys: Sequence[Hashable], zs: Sequence[Hashable], *, key: str,
                  permutations: int = 999) -> float:
    """P-value of I(X; Y | Z) against Y shuffled within each stratum of Z (the conditional null).

    (1 + #{permuted >= observed}) / (1 + permutations); seeded by ``key``, so the same inputs give the
    same p-value. 1.0 when there is nothing to test (no tasks, or X or Y constant).
    """
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return 1.0
    x, y, z = (np.asarray(_codes(v)) for v in (xs, ys, zs))
    observed = _cmi(x, y[None, :], z)[0]
    rng = np.random.default_rng(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))
    grouped = np.argsort(z, kind="stable")  # positions, stratum by stratum
    order = np.argsort(z[None, :] + rng.random((permutations, x.size)), axis=1)  # same strata, shuffled within
    shuffled = np.empty((permutations, x.size), dtype=y.dtype)
    shuffled[:, grouped] = y[order]
    null = _cmi(x, shuffled, z)
    return float((1 + np.sum(null >= observed - 1e-12)) / (1 + permutations))


def nmi(xs: Sequence[Hashable], ys: Sequence[Hashable]) -> float:
    """I(X; Y) / sqrt(H(X) H(Y)); 0 when either side is constant (sklearn scores two constant
    labelings 1.0, as identical clusterings; a constant probe tells nothing about tool count)."""
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return 0.0
    from sklearn.metrics import normalized_mutual_info_score

    return float(normalized_mutual_info_score(_codes(xs), _codes(ys), average_method="geometric"))


# ------------------------------------------------------------------ over a probe's buckets (the Reflector's rules)
def failure_trend(p: Probe) -> float:
    """Spearman correlation, over diagnostic tasks, between the probe's bucket order and failure.

    Positive when tasks in higher buckets (more writes, more reads, ...) fail more often;
    0 when there are too few tasks or no variation.
    """
    xs: list[int] = []
    ys: list[int] = []
    for i, b in enumerate(p.buckets):
        if b.count and b.failure_rate is not None:
            fails = round(b.failure_rate * b.count)
            xs += [i] * b.count
            ys += [1] * fails + [0] * (b.count - fails)
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return 0.0
    from scipy.stats import spearmanr

    rho = spearmanr(xs, ys).statistic
    return float(rho) if rho == rho else 0.0


def gap_failure_p(p: Probe, min_count: int = 3) -> float:
    """One-sided Fisher exact p-value that the learner fails more often in the probe's under-covered buckets
    (coverage below half a uniform share) than in its other buckets; 1.0 with fewer than ``min_count``
    diagnostic tasks in the under-covered buckets, or none elsewhere."""
    share = 0.5 / max(1, len(p.buckets))
    table = {True: [0, 0], False: [0, 0]}  # under-covered? -> [failures, tasks]
    for b in p.buckets:
        if b.count and b.failure_rate is not None:
            row = table[b.coverage < share]
            row[0] += round(b.failure_rate * b.count)
            row[1] += b.count
    (f_gap, n_gap), (f_rest, n_rest) = table[True], table[False]
    if n_gap < min_count or not n_rest:
        return 1.0
    from scipy.stats import fisher_exact

    return float(fisher_exact([[f_gap, n_gap - f_gap], [f_rest, n_rest - f_rest]], alternative="greater").pvalue)
