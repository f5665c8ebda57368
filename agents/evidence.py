"""Learner evidence over a probe's buckets, as the Reflector reads it (App. D): which buckets fail more than the
rest (the evidence a new factor is ranked by, and the values it is added for), and the review of a factor added
earlier (did the learner's success on those values rise once they were synthesized?).

Statistics here are evidence, never gates: the decisions rest on the direction of an effect with a minimum of
support, and every p-value and interval is written beside the decision for a reader to weigh.
"""
from __future__ import annotations

from dataclasses import dataclass

from evosyn.agents.probes import gap_failure_p
from evosyn.storage.records import Baseline, DimensionReview, Factor, Probe

GAP = 0.8  # a coverage gap: some bucket holds less than a fifth of its uniform share of the data


def _counts(p: Probe) -> dict[str, tuple[int, int]]:
    """bucket -> (failures, diagnostic tasks), for the buckets the learner was measured on."""
    return {b.bucket: (round(b.failure_rate * b.count), b.count) for b in p.buckets
            if b.count and b.failure_rate is not None}


def excess_failure(p: Probe) -> dict[str, float]:
    """bucket -> its failure rate minus the failure rate of the probe's other measured buckets, pooled."""
    counts = _counts(p)
    fails, tasks = sum(f for f, _ in counts.values()), sum(n for _, n in counts.values())
    return {b: f / n - (fails - f) / (tasks - n) for b, (f, n) in counts.items() if tasks > n}


@dataclass(frozen=True)
class Evidence:
    """A candidate's learner evidence: the buckets that fail more than the rest, and the statistics behind it."""

    probe: Probe
    excess: dict[str, float]
    gap_p: float | None  # one-sided Fisher p that its under-covered buckets fail more (a coverage gap only)

    @property
    def targeted(self) -> list[str]:
        return [b.bucket for b in self.probe.buckets if self.excess.get(b.bucket, 0.0) > 0]

    @property
    def effect(self) -> float:
        """The weakest bucket's excess failure (0 when no bucket fails more than the rest)."""
        return max([0.0, *self.excess.values()])

    @property
    def gap_fails_more(self) -> bool:
        """A coverage gap the learner fails in: under-covered buckets fail more often than the others."""
        share = 0.5 / max(1, len(self.probe.buckets))
        return self.gap_p is not None and any(self.excess.get(b.bucket, 0.0) > 0 for b in self.probe.buckets
                                              if b.coverage < share)

    @property
    def strength(self) -> float:
        """The smallest p-value behind it (the permutation test of the CMI, or the coverage gap's Fisher test)."""
        return min(self.probe.p_value, self.gap_p if self.gap_fails_more else 1.0)

    def rank_key(self) -> tuple:
        """Strongest evidence first; at equal strength, a coverage gap the learner fails in (the paper's
        R2 -> R3 evidence: steered data there shows the learner what it has not seen), then the larger effect."""
        return self.strength, not self.gap_fails_more, -self.effect, -self.probe.cmi_given_space, self.probe.probe

    def describe(self) -> str:
        p = self.probe
        rates = ", ".join(f"{b.bucket}: {b.failure_rate:.2f} fail (n={b.count}, cov {b.coverage:.2f})"
                          for b in p.buckets if b.failure_rate is not None)
        gap = (f"; coverage gap {p.coverage_gap:.2f}, its under-covered buckets fail more (Fisher p = "
               f"{self.gap_p:.4f})" if self.gap_fails_more else "")
        return (f"excess failure {self.effect:+.2f} (on {', '.join(self.targeted)}); I(Y_fail; {p.probe} | O_r) = "
                f"{p.cmi_given_space:.3f} nats (permutation p = {p.p_value:.3f}, n = {p.support}), residual given "
                f"tool-count tertile {p.residual_cmi:.3f}{gap}; {rates}")


def evidence(p: Probe) -> Evidence:
    return Evidence(p, excess_failure(p), gap_failure_p(p) if p.coverage_gap > GAP else None)


def baseline(p: Probe | None, round: int) -> Baseline:
    """The learner's success on the buckets of ``p`` that fail more than the rest (none without evidence)."""
    if p is None:
        return Baseline(round=round)
    values = evidence(p).targeted
    return Baseline(values=values, round=round, **_pooled(p, values))


def _pooled(p: Probe, values: list[str]) -> dict[str, int]:
    counts = _counts(p)
    n = sum(counts[v][1] for v in values if v in counts)
    return {"tasks": n, "successes": n - sum(counts[v][0] for v in values if v in counts)}


def review(f: Factor, p: Probe | None, *, min_tasks: int = 5) -> DimensionReview:
    """App. D review of an experimental factor: promote it to standard when the learner's success on the values it
    was added for rose after they were synthesized, deprecate it when it did not (its budget returns to the rest of
    the space; its data stays), keep it experimental while either measurement has fewer than ``min_tasks`` tasks."""
    base = f.baseline or Baseline()
    if not base.values or base.tasks < min_tasks:
        why = ("it was added without learner evidence" if not base.values
               else f"only {base.tasks} tasks on {', '.join(base.values)} when it was added")
        return DimensionReview(dimension=f.key, decision="keep_experimental", reason=f"evidence too thin: {why}",
                               evidence=f"baseline (round {base.round}): {base.tasks} tasks")
    now = _pooled(p, base.values) if p is not None else {"tasks": 0, "successes": 0}
    before = f"{base.successes / base.tasks:.2f} ({base.successes}/{base.tasks}, round {base.round})"
    if now["tasks"] < min_tasks:
        return DimensionReview(dimension=f.key, decision="keep_experimental",
                               reason=f"evidence too thin: only {now['tasks']} tasks on {', '.join(base.values)} now",
                               evidence=f"success on {', '.join(base.values)}: {before} -> {now['tasks']} tasks")
    from scipy.stats import fisher_exact

    s0, n0, s1, n1 = base.successes, base.tasks, now["successes"], now["tasks"]
    rise = s1 / n1 - s0 / n0
    p_rise = float(fisher_exact([[s1, n1 - s1], [s0, n0 - s0]], alternative="greater").pvalue)
    others = _others(f, p, base.values)
    text = (f"success on {', '.join(base.values)}: {before} -> {s1 / n1:.2f} ({s1}/{n1}), {rise:+.2f} "
            f"(one-sided Fisher p = {p_rise:.3f}){others}")
    if rise > 0:
        return DimensionReview(dimension=f.key, decision="promote", evidence=text,
                               reason="the learner's success on the values it was added for rose")
    return DimensionReview(dimension=f.key, decision="deprecate", evidence=text,
                           reason="the learner's success on the values it was added for did not rise: its budget "
                                  "returns to the rest of the space (its data stays)")


def _others(f: Factor, p: Probe | None, targeted: list[str]) -> str:
    rest = [v for v in f.values if v not in targeted]
    pooled = _pooled(p, rest) if p is not None else {"tasks": 0}
    if not pooled["tasks"]:
        return ""
    return f"; its other values now {pooled['successes'] / pooled['tasks']:.2f} ({pooled['tasks']} tasks)"
