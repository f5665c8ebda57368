"""Reflector: revises the synthesis space from learner feedback (§4.2, App. D).

Embedded decision rules:
  1. Review experimental factors: promote one whose weak buckets got covered
     (coverage gap below ``gap_ok``), deprecate one that carries no failure
     information and no coverage gap, otherwise keep it experimental.
  2. If the weakness is expressible in the current space, reallocate only.
  3. Otherwise add at most one factor from a probe that is evidence-grounded
     (failure-driven: I(Y_fail; d | O_r) >= ``min_cmi`` with enough diagnostic
     tasks; coverage-gap-driven only with learner evidence of failure in the
     under-covered region), interpretable and low-cardinality (<= 6 buckets),
     non-redundant (residual information beyond tool count >= ``min_residual``)
     and realizable by the generator. Seed factors are never renamed, merged or deleted.
Without learner evidence (the no-feedback control) only coverage is visible,
and coverage alone does not say a region matters: the space is kept.
"""
from __future__ import annotations

from typing import Protocol

from storage.records import (DimensionReview, Factor, Feedback, Probe, Proposal, Reflection, SpaceChange,
                             SynthesisSpace)


class Reflector(Protocol):
    def reflect(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int
                ) -> tuple[Reflection, SynthesisSpace]: ...


class EmbeddedReflector:
    def __init__(self, min_cmi: float = 0.02, min_residual: float = 0.01, min_tasks: int = 20,
                 gap_ok: float = 0.5, max_buckets: int = 6):
        self.min_cmi, self.min_residual, self.min_tasks = min_cmi, min_residual, min_tasks
        self.gap_ok, self.max_buckets = gap_ok, max_buckets

    def reflect(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int
                ) -> tuple[Reflection, SynthesisSpace]:
        by_name = {p.probe: p for p in probes}
        reviews = self._review(space, by_name)
        proposal = self._propose(space, feedback, probes) if feedback.with_learner_evidence else None
        changes = [SpaceChange(kind={"promote": "promote", "deprecate": "deprecate"}.get(r.decision,
                                                                                          "keep_experimental"),
                               factor=r.dimension, reason=r.reason, evidence=r.evidence) for r in reviews]
        factors = [f.model_copy() for f in space.factors]
        for r in reviews:
            for f in factors:
                if f.key == r.dimension and r.decision in ("promote", "deprecate"):
                    f.status = "standard" if r.decision == "promote" else "deprecated"
        if proposal is not None:
            factors.append(Factor(key=proposal.dimension_name, values=proposal.values, status="experimental",
                                  observable=True, added_in=space.version + 1,
                                  guidance=f"promoted from the {proposal.dimension_name} probe: {proposal.evidence}"))
            changes.append(SpaceChange(kind="add_factor", factor=proposal.dimension_name, values=proposal.values,
                                       reason=proposal.reason, evidence=proposal.evidence))
        changed = any(c.kind in ("add_factor", "promote", "deprecate") for c in changes)
        new_space = space
        if changed:
            new_space = space.model_copy(update={"version": space.version + 1, "parent_version": space.version,
                                                 "factors": factors, "diff": changes, "round": round,
                                                 "space_version": space.version + 1})
        proposals = [proposal] if proposal else [Proposal(action="no_change", reason=self._why_not(feedback, probes))]
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

    def _eligible(self, space: SynthesisSpace, p: Probe) -> bool:
        keys = {f.key for f in space.factors}
        return (not p.in_space and p.probe not in keys and bool(p.suggested_factor)
                and 2 <= len(p.suggested_values) <= self.max_buckets)

    def _propose(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe]) -> Proposal | None:
        if feedback.n_evaluated < self.min_tasks:
            return None
        candidates = [p for p in probes if self._eligible(space, p)]
        failure = sorted((p for p in candidates if p.cmi_given_space >= self.min_cmi
                          and p.residual_cmi >= self.min_residual), key=lambda p: -p.cmi_given_space)
        if failure:
            p = failure[0]
            return Proposal(action="promote_probe_to_dimension", dimension_name=p.suggested_factor,
                            values=p.suggested_values, reason="failure-driven",
                            evidence=_evidence(p))
        gaps = sorted((p for p in candidates if p.coverage_gap > 0.8 and any(
            (b.failure_rate or 0) > 0.5 and b.count >= 3 for b in p.buckets)), key=lambda p: -p.coverage_gap)
        if gaps:
            p = gaps[0]
            return Proposal(action="promote_probe_to_dimension", dimension_name=p.suggested_factor,
                            values=p.suggested_values, reason="coverage-gap-driven", evidence=_evidence(p))
        return None

    def _why_not(self, feedback: Feedback, probes: list[Probe]) -> str:
        if not feedback.with_learner_evidence:
            return "no learner evidence: coverage alone does not show that a region matters"
        if feedback.n_evaluated < self.min_tasks:
            return f"only {feedback.n_evaluated} diagnostic tasks"
        return "weaknesses are expressible in the current space"


def _evidence(p: Probe) -> str:
    rates = ", ".join(f"{b.bucket}: {b.failure_rate:.2f} fail (n={b.count}, cov {b.coverage:.2f})"
                      for b in p.buckets if b.failure_rate is not None)
    return (f"I(Y_fail; {p.probe} | O_r) = {p.cmi_given_space:.3f} nats, residual given tool-count tertile "
            f"{p.residual_cmi:.3f}, NMI with tertiles {p.nmi_tool_tertiles:.2f}; {rates}")
