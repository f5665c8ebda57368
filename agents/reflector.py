"""Reflector: revises the synthesis space from learner feedback (§4.2, App. D).

Embedded decision rules:
  1. Review experimental factors: promote one whose weak buckets got covered
     (coverage gap below ``gap_ok``), deprecate one that carries no failure
     information and no coverage gap, otherwise keep it experimental.
  2. If the weakness is expressible in the current space, reallocate only.
  3. Otherwise add at most one factor, from the probes that are both
     - controllable: the domain's generator realizes the property
       (``suggested_factor``, the pack's ``controllable``), low-cardinality
       (<= ``max_buckets`` buckets) and not in the space yet; and
     - significant beyond the current space: I(Y_fail; d | O_r) >= ``min_cmi``
       with a permutation p-value that passes Holm's step-down correction at
       ``alpha`` over all candidates tested, residual information beyond tool
       count >= ``min_residual``, and support (at least two buckets with
       ``min_bucket`` diagnostic tasks each); or
     - a coverage gap the learner fails in: coverage gap > 0.8 and its
       under-covered buckets fail more often than its others (one-sided Fisher
       exact test on >= 3 tasks there, Holm-corrected over those candidates).
     High failure and low coverage goes first (the paper's R2 -> R3 evidence):
     a failing region the data barely holds is where steered data adds what
     the learner has not seen, while a failing axis the data already covers
     is still fed as the data grows. So a coverage gap the learner fails in
     wins (the smallest Fisher p), and otherwise the largest CMI among the
     significant candidates. Every candidate passed over is listed with the
     reason (a ``no_change`` proposal naming it). Seed factors are never
     renamed, merged or deleted.
Without learner evidence (the no-feedback control, App. B.6) nothing says where
the learner fails, so no candidate is better supported than another: the
control still revises the space from what it may see (the ontology, the
environment's tools and the generator's controllable properties) by promoting
one controllable property not yet in the space, drawn uniformly with a seed
of the run and round, in every round the feedback arm could promote one.
"""
from __future__ import annotations

import hashlib
import random
from typing import Protocol

from agents.probes import failure_trend, gap_failure_p
from storage.records import (DimensionReview, Factor, Feedback, Probe, Proposal, Reflection, SpaceChange,
                             SynthesisSpace)


class Reflector(Protocol):
    def reflect(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int
                ) -> tuple[Reflection, SynthesisSpace]: ...


class EmbeddedReflector:
    def __init__(self, min_cmi: float = 0.02, min_residual: float = 0.01, min_tasks: int = 20,
                 gap_ok: float = 0.5, max_buckets: int = 6, alpha: float = 0.05,
                 min_bucket: int = 5):
        self.min_cmi, self.min_residual, self.min_tasks = min_cmi, min_residual, min_tasks
        self.alpha, self.min_bucket = alpha, min_bucket
        self.gap_ok, self.max_buckets = gap_ok, max_buckets

    def reflect(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int
                ) -> tuple[Reflection, SynthesisSpace]:
        by_name = {p.probe: p for p in probes}
        reviews = self._review(space, by_name)
        passed: dict[str, str] = {}
        proposal = (self._propose(space, feedback, probes, passed) if feedback.with_learner_evidence
                    else self._evidence_free(space, feedback, probes, round, passed))
        new_space = apply_reflection(space, reviews, proposal, round=round)
        proposals = [proposal] if proposal else [Proposal(action="no_change", reason=self._why_not(feedback, probes))]
        proposals += [Proposal(action="no_change", dimension_name=name, reason=f"passed over: {why}")
                      for name, why in passed.items() if proposal is None or name != proposal.dimension_name]
        summary = (f"added {proposal.dimension_name} ({proposal.reason})" if proposal else
                   "reallocation only: " + proposals[0].reason)
        reflection = Reflection(run_id=feedback.run_id, round=round, space_version=space.version,
                                round_id=f"{feedback.run_id}/r{round}", synthesis_space_version_in=space.version,
                                synthesis_space_version_out=new_space.version, dimension_reviews=reviews,
                                new_proposals=proposals, summary=summary,
                                steering="new_factor" if proposal else "learner_feedback")
        return reflection, new_space

    def _review(self, space: SynthesisSpace, probes: dict[str, Probe]) -> list[DimensionReview]:
        reviews = []
        for f in space.factors:
            if f.status != "experimental" or f.added_in > space.version:
                continue
            p = probes.get(f.key)
            if p is None:
                reviews.append(DimensionReview(dimension=f.key, decision="keep_experimental",
                                               reason="no probe measures it yet"))
            elif p.coverage_gap <= self.gap_ok:
                reviews.append(DimensionReview(dimension=f.key, decision="promote", reason="its buckets are now covered",
                                               evidence=f"coverage gap {p.coverage_gap:.2f}, CMI {p.cmi_given_space:.3f}"))
            elif p.cmi_given_space < self.min_cmi / 4 and p.coverage_gap < 0.1:
                reviews.append(DimensionReview(dimension=f.key, decision="deprecate", reason="no failure signal left"))
            else:
                reviews.append(DimensionReview(dimension=f.key, decision="keep_experimental",
                                               reason="still under-covered", evidence=f"gap {p.coverage_gap:.2f}"))
        return reviews

    def _candidates(self, space: SynthesisSpace, probes: list[Probe], passed: dict[str, str]) -> list[Probe]:
        """Probes the Reflector may promote; every other probe outside the space goes to ``passed`` with why."""
        keys = {f.key for f in space.factors}
        out = []
        for p in probes:
            if p.in_space or p.probe in keys:
                continue
            if not p.suggested_factor:
                passed[p.probe] = f"the {space.domain} generator cannot control it"
            elif not 2 <= len(p.suggested_values) <= self.max_buckets:
                passed[p.probe] = f"{len(p.suggested_values)} buckets (at most {self.max_buckets})"
            else:
                out.append(p)
        return out

    def _supported(self, p: Probe) -> bool:
        return sum(b.count >= self.min_bucket for b in p.buckets) >= 2

    def _propose(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], passed: dict[str, str]
                 ) -> Proposal | None:
        candidates = self._candidates(space, probes, passed)
        if feedback.n_evaluated < self.min_tasks:
            for p in candidates:
                passed[p.probe] = f"only {feedback.n_evaluated} diagnostic tasks (at least {self.min_tasks})"
            return None
        significant = []
        holm_open = True  # Holm's step-down: the i-th smallest p-value against alpha / (m - i), stopping at a miss
        for i, p in enumerate(sorted(candidates, key=lambda p: (p.p_value, p.probe))):
            threshold = self.alpha / (len(candidates) - i)
            holm_open = holm_open and p.p_value <= threshold
            why = _short(p) + f", Holm threshold {threshold:.4f}"
            if not holm_open:
                passed[p.probe] = "not significant beyond the space: " + why
            elif p.cmi_given_space < self.min_cmi:
                passed[p.probe] = f"CMI below {self.min_cmi}: " + why
            elif p.residual_cmi < self.min_residual:
                passed[p.probe] = f"redundant with tool count (residual {p.residual_cmi:.3f}): " + why
            elif not self._supported(p):
                passed[p.probe] = f"thin support (fewer than two buckets with {self.min_bucket} tasks): " + why
            else:
                significant.append(p)
                passed[p.probe] = "significant, but a larger CMI won: " + why
        gap = self._failing_gap(candidates, passed)
        if gap is not None:  # high failure and low coverage first (module doc)
            p, p_gap = gap
            for q in significant:
                passed[q.probe] = ("significant, but a coverage gap the learner fails in goes first: "
                                   + _short(q))
            return Proposal(action="promote_probe_to_dimension", dimension_name=p.suggested_factor,
                            values=p.suggested_values, reason="coverage-gap-driven",
                            evidence=f"under-covered buckets fail more often (Fisher p = {p_gap:.4f}); " + _evidence(p))
        if significant:
            p = max(significant, key=lambda p: (p.cmi_given_space, p.probe))
            return Proposal(action="promote_probe_to_dimension", dimension_name=p.suggested_factor,
                            values=p.suggested_values, reason="failure-driven", evidence=_evidence(p))
        return None

    def _failing_gap(self, candidates: list[Probe], passed: dict[str, str]) -> tuple[Probe, float] | None:
        """The severely under-covered candidate (coverage gap > 0.8) whose under-covered buckets fail more often
        than its others, by the smallest one-sided Fisher p that passes Holm over those candidates; else None.
        Every other gap candidate's reason in ``passed`` gains its Fisher test."""
        p_gaps = {p.probe: gap_failure_p(p) for p in candidates if p.coverage_gap > 0.8}
        gaps = sorted((p for p in candidates if p.probe in p_gaps), key=lambda p: (p_gaps[p.probe], p.probe))

        def note(q: Probe, text: str) -> None:
            passed[q.probe] = "; ".join(filter(None, [passed.get(q.probe, ""), text]))

        for i, p in enumerate(gaps):
            threshold = self.alpha / (len(gaps) - i)
            if p_gaps[p.probe] <= threshold:
                for q in gaps[i + 1:]:
                    note(q, f"coverage gap failing more (Fisher p = {p_gaps[q.probe]:.4f}), but a smaller p won")
                return p, p_gaps[p.probe]
            for q in gaps[i:]:
                note(q, f"coverage gap without significantly more failure there (Fisher p = {p_gaps[q.probe]:.4f}, "
                        f"Holm threshold {threshold:.4f})")
            break
        return None

    def _evidence_free(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], round: int,
                       passed: dict[str, str]) -> Proposal | None:
        """The no-feedback control's rule (module doc): one controllable property, drawn uniformly."""
        candidates = sorted(self._candidates(space, probes, passed), key=lambda p: p.probe)
        if not candidates:
            return None
        rng = random.Random(int(hashlib.sha256(f"{feedback.run_id}/{round}".encode()).hexdigest()[:16], 16))
        p = rng.choice(candidates)
        for q in candidates:
            if q is not p:
                passed[q.probe] = "not drawn (no learner evidence: every controllable property is equally supported)"
        return Proposal(action="promote_probe_to_dimension", dimension_name=p.suggested_factor,
                        values=p.suggested_values, reason="evidence-free draw",
                        evidence=f"drawn uniformly among {len(candidates)} controllable properties not in the space "
                                 f"({', '.join(q.probe for q in candidates)}); no learner evidence")

    def _why_not(self, feedback: Feedback, probes: list[Probe]) -> str:
        if not feedback.with_learner_evidence:
            return "no learner evidence, and no controllable property left outside the space"
        if feedback.n_evaluated < self.min_tasks:
            return f"only {feedback.n_evaluated} diagnostic tasks"
        return "weaknesses are expressible in the current space"


def _short(p: Probe) -> str:
    return f"p = {p.p_value:.3f}, CMI {p.cmi_given_space:.3f}, n = {p.support}"


def _evidence(p: Probe) -> str:
    rates = ", ".join(f"{b.bucket}: {b.failure_rate:.2f} fail (n={b.count}, cov {b.coverage:.2f})"
                      for b in p.buckets if b.failure_rate is not None)
    return (f"I(Y_fail; {p.probe} | O_r) = {p.cmi_given_space:.3f} nats (permutation p = {p.p_value:.3f}, "
            f"n = {p.support}), residual given tool-count tertile "
            f"{p.residual_cmi:.3f}, NMI with tertiles {p.nmi_tool_tertiles:.2f}, failure trend "
            f"rho = {failure_trend(p):.2f}; {rates}")


def apply_reflection(space: SynthesisSpace, reviews: list[DimensionReview], proposal: Proposal | None, *,
                     round: int) -> SynthesisSpace:
    """The next space version (or the same one when nothing changed)."""
    factors = [f.model_copy() for f in space.factors]
    changes = [SpaceChange(kind={"promote": "promote", "deprecate": "deprecate"}.get(r.decision, "keep_experimental"),
                           factor=r.dimension, reason=r.reason, evidence=r.evidence) for r in reviews]
    for r in reviews:
        for f in factors:
            if f.key == r.dimension and r.decision in ("promote", "deprecate"):
                f.status = "standard" if r.decision == "promote" else "deprecated"
    if proposal is not None and proposal.action == "promote_probe_to_dimension":
        factors.append(Factor(key=proposal.dimension_name, values=proposal.values, status="experimental",
                              observable=True, added_in=space.version + 1,
                              guidance=f"promoted from the {proposal.dimension_name} probe: {proposal.evidence}"))
        changes.append(SpaceChange(kind="add_factor", factor=proposal.dimension_name, values=proposal.values,
                                   reason=proposal.reason, evidence=proposal.evidence))
    elif proposal is not None:
        for f in factors:
            if f.key == proposal.dimension_name:
                f.values = [*f.values, *proposal.values]
        changes.append(SpaceChange(kind="add_value", factor=proposal.dimension_name, values=proposal.values,
                                   reason=proposal.reason, evidence=proposal.evidence))
    if not any(c.kind in ("add_factor", "add_value", "promote", "deprecate") for c in changes):
        return space
    return space.model_copy(update={"version": space.version + 1, "parent_version": space.version,
                                    "factors": factors, "diff": changes, "round": round,
                                    "space_version": space.version + 1})
