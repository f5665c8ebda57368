"""Learner feedback after a round (§4.2): performance and coverage per factor value, and the probe report."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from evosyn.agents.probes import PROBES, TaskProfile, coarsen, conditional_mi, nmi, permutation_p, tool_count_tertiles
from evosyn.envs.packs import DomainPack
from evosyn.storage.records import Evaluation, Feedback, Probe, ProbeBucket, SliceStat, SynthesisSpace


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a success rate (scipy's ``binomtest(...).proportion_ci(method="wilson")``).

    With no trials there is no evidence about the rate, so every rate is consistent with it: (0, 1). (scipy
    refuses ``n == 0``; this is the one place that decides what no trials means, for feedback and reports.)
    """
    if n == 0:
        return 0.0, 1.0
    # imported on use: scipy.stats is about 0.7 s of imports
    from scipy.stats import binomtest

    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


@dataclass
class FeedbackInputs:
    """Everything feedback reads, already joined: per-task factor values, outcomes and gold profiles."""

    space: SynthesisSpace
    values: dict[str, dict[str, list[str]]]  # task_id -> factor -> values (requested, or observed if measurable)
    evaluations: list[Evaluation]  # this round's diagnostic evaluations
    verified: list[str]  # task ids of all verified data so far (coverage)
    profiles: dict[str, TaskProfile] = field(default_factory=dict)
    previous: Feedback | None = None
    with_learner_evidence: bool = True
    probe_evaluations: list[Evaluation] = field(default_factory=list)  # a balanced probe set's: probes only


def build_feedback(inp: FeedbackInputs, *, run_id: str, round: int, model_version: str) -> Feedback:
    perf: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    evals = inp.evaluations if inp.with_learner_evidence else []
    for e in evals:
        for key, values in inp.values.get(e.task_id, {}).items():
            for v in values:
                perf[(key, v)][0] += int(e.success)
                perf[(key, v)][1] += 1
    prev = {(s.factor, s.value): s.success_rate for s in (inp.previous.performance if inp.previous else [])}
    cover: Counter = Counter()
    for tid in inp.verified:
        for key, values in inp.values.get(tid, {}).items():
            for v in values:
                cover[(key, v)] += 1
    total = max(1, len(inp.verified))
    performance, coverage = [], []
    for f in inp.space.active:
        for v in f.values:
            s, n = perf.get((f.key, v), (0, 0))
            rate = s / n if n else None
            lo, hi = wilson(s, n)
            delta = (rate - prev[(f.key, v)]) if rate is not None and prev.get((f.key, v)) is not None else None
            if n:
                performance.append(SliceStat(factor=f.key, value=v, count=n, successes=s, success_rate=rate,
                                             ci_low=lo, ci_high=hi, delta=delta))
            coverage.append(SliceStat(factor=f.key, value=v, count=cover[(f.key, v)],
                                      coverage=cover[(f.key, v)] / total))
    n = len(evals)
    return Feedback(run_id=run_id, round=round, space_version=inp.space.version, feedback_id=f"fb-{run_id}-{round}",
                    model_version=model_version, overall_success=(sum(e.success for e in evals) / n) if n else 0.0,
                    n_evaluated=n, performance=performance, coverage=coverage,
                    with_learner_evidence=inp.with_learner_evidence)


def probe_report(inp: FeedbackInputs, pack: DomainPack, *, run_id: str, round: int) -> list[Probe]:
    """Every probe (the common ones and the domain ``pack``'s own) over the round's evaluations and verified data;
    a probe the pack's generator controls is suggested as a factor."""
    in_space = {f.key for f in inp.space.active}
    evals = [e for e in inp.evaluations + inp.probe_evaluations if e.task_id in inp.profiles] \
        if inp.with_learner_evidence else []
    diag = [inp.profiles[e.task_id] for e in evals]
    fails = [int(not e.success) for e in evals]
    tertile = tool_count_tertiles(diag)
    verified = [inp.profiles[t] for t in inp.verified if t in inp.profiles]
    realizable = pack.controllable  # probes the pack's generator realizes as factors (the Reflector may promote)
    strata = coarsen([p.stratum for p in diag])  # O_r: the space's factors, pooled where too few tasks share them
    out = []
    for name, (fn, buckets) in {**PROBES, **pack.extra_probes()}.items():
        d_vals = [fn(p) for p in diag]
        c_vals = Counter(fn(p) for p in verified)
        names = buckets or sorted(set(d_vals) | set(c_vals))
        rows = []
        for b in names:
            idx = [i for i, v in enumerate(d_vals) if v == b]
            rows.append(ProbeBucket(bucket=b, count=len(idx),
                                    failure_rate=(sum(fails[i] for i in idx) / len(idx)) if idx else None,
                                    coverage=c_vals[b] / max(1, len(verified))))
        cmi = conditional_mi(fails, d_vals, strata) if diag else 0.0
        p_value = permutation_p(fails, d_vals, strata, key=f"{run_id}/{round}/{name}") if diag else 1.0
        g = [tertile[p.task_id] for p in diag]
        expected = 1.0 / max(1, len(names))
        gap = max((expected - r.coverage) / expected for r in rows) if rows else 0.0
        out.append(Probe(run_id=run_id, round=round, space_version=inp.space.version, probe=name, buckets=rows,
                         cmi_given_space=cmi, nmi_tool_tertiles=nmi(d_vals, g) if diag else 0.0,
                         residual_cmi=conditional_mi(fails, d_vals, g) if diag else 0.0, coverage_gap=max(0.0, gap),
                         suggested_factor=name if name in realizable else "",
                         suggested_values=names if name in realizable else [], in_space=name in in_space,
                         p_value=p_value, support=sum(v in names for v in d_vals)))
    return out
