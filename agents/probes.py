"""Diagnostic probes: measurable trajectory properties, and the information they carry about failure.

A probe buckets a task by a property of its gold (verified teacher) solution.
For each probe we report failure rate and coverage per bucket and
  I(Y_fail; d | O_r)   conditional mutual information given the current space's
                       stratum (task family x outcome x difficulty), App. B.10;
  NMI(d, g)            normalized mutual information with tool-count tertiles g;
  I(Y_fail; d | g)     residual failure information beyond tool count, App. B.11.
All in nats, plug-in estimates.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

from scipy.stats import entropy as scipy_entropy
from sklearn.metrics import mutual_info_score, normalized_mutual_info_score

from storage.records import Message


@dataclass
class TaskProfile:
    """What the probes need about one task: its gold solution and its space stratum."""

    task_id: str
    observed: dict[str, list[str]]
    stratum: tuple[str, ...]
    gold: list[Message]


def _calls(p: TaskProfile) -> list:
    return [c for m in p.gold for c in m.tool_calls]


def _entities(p: TaskProfile) -> str:
    ids = {str(v) for c in _calls(p) for k, v in c.arguments.items() if k.endswith("_id")}
    return "1" if len(ids) <= 1 else "2" if len(ids) == 2 else "3+"


def _turns(p: TaskProfile) -> str:
    n = sum(1 for m in p.gold if m.role == "assistant")
    return "<=6" if n <= 6 else "7-12" if n <= 12 else "13+"


PROBES: dict[str, tuple[Callable[[TaskProfile], str], list[str]]] = {
    "num_write": (lambda p: p.observed.get("num_write", ["0"])[0], ["0", "1", "2", "3-4", "5+"]),
    "num_read": (lambda p: p.observed.get("num_read", ["0"])[0], ["0", "1", "2", "3-4", "5+"]),
    "numeric_arguments": (lambda p: p.observed.get("computation", ["none"])[0], ["none", "required"]),
    "entities_touched": (_entities, ["1", "2", "3+"]),
    "turns": (_turns, ["<=6", "7-12", "13+"]),
    "transfers": (lambda p: "yes" if any(c.name == "transfer_to_human_agents" for c in _calls(p)) else "no",
                  ["no", "yes"]),
    "order_pattern": (lambda p: p.observed.get("trajectory_pattern", ["none"])[0], []),
    "state_change_type": (lambda p: p.observed.get("state_change_type", ["none"])[0], []),  # the pack's kinds
}


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
    return float(scipy_entropy(list(Counter(xs).values()))) if len(xs) else 0.0


def mutual_information(xs: Sequence[Hashable], ys: Sequence[Hashable]) -> float:
    return float(mutual_info_score(_codes(xs), _codes(ys))) if len(xs) else 0.0


def conditional_mi(xs: Sequence[Hashable], ys: Sequence[Hashable], zs: Sequence[Hashable]) -> float:
    """I(X; Y | Z) = sum_z p(z) I(X; Y | Z = z): the stratum weighting is ours, each term sklearn's."""
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, z in enumerate(zs):
        groups[z].append(i)
    n = len(xs)
    return sum(len(idx) / n * mutual_information([xs[i] for i in idx], [ys[i] for i in idx])
               for idx in groups.values()) if n else 0.0


def nmi(xs: Sequence[Hashable], ys: Sequence[Hashable]) -> float:
    """I(X; Y) / sqrt(H(X) H(Y)); 0 when either side is constant (sklearn scores two constant
    labelings 1.0, as identical clusterings; a constant probe tells nothing about tool count)."""
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return 0.0
    return float(normalized_mutual_info_score(_codes(xs), _codes(ys), average_method="geometric"))
