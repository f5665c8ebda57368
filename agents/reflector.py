"""Reflector: revises the synthesis space from learner feedback (§4.2, App. D).

Embedded decision rules, one revision of the space per round at most:
  1. Review each experimental factor (``evosyn.agents.evidence.review``): promote it to standard when the learner's
     success on the values it was added for (its ``baseline``) rose after they were synthesized, deprecate it
     when it did not (the Designer and Planner then leave it out: its budget returns to the rest of the space,
     its data stays), keep it experimental while the evidence is too thin (fewer than ``min_bucket`` tasks).
  2. Propose at most one new factor, among the controllable properties not in the space (the pack's
     ``controllable``, at most ``max_buckets`` buckets): the one with the strongest learner evidence
     (``evosyn.agents.evidence.Evidence.rank_key``): failure associated with the property beyond the current space
     (the CMI's permutation p-value) or a coverage gap the learner fails in (its one-sided Fisher p), the
     smaller p first, a coverage gap first at equal strength, then the larger effect (excess failure of the
     weakest bucket over the others). A candidate shows learner evidence when some bucket fails more than
     its other buckets; the Reflector proposes nothing only when no candidate shows any. The statistics rank
     and are recorded as evidence; none is a gate, so the feedback arm expands the space at the control's
     rate and the arms differ in which factor, not in when. Every candidate passed over is listed with its
     rank and evidence (a ``no_change`` proposal naming it). Seed factors are never renamed, merged or deleted.
Without learner evidence (the no-feedback control, App. B.6) nothing says where the learner fails, so no candidate
is better supported than another: the control promotes one controllable property not yet in the space, drawn
uniformly with a seed of the run and round, every round (and keeps its factors experimental: it has no evidence
to review them by).
"""
from __future__ import annotations

import hashlib
import random
from typing import Protocol

from evosyn.agents.evidence import Evidence, baseline, evidence, review
from evosyn.storage.records import (DimensionReview, Factor, Feedback, Probe, Proposal, Reflection, SpaceChange,
                             SynthesisSpace)


class Reflector(Protocol):
    def reflect(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int
                ) -> tuple[Reflection, SynthesisSpace]: ...


class EmbeddedReflector:
    def __init__(self, max_buckets: int = 6, min_bucket: int = 5):
        self.max_buckets, self.min_bucket = max_buckets, min_bucket

    def reflect(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int
                ) -> tuple[Reflection, SynthesisSpace]:
        by_name = {p.probe: p for p in probes}
        reviews = [review(f, by_name.get(f.key), min_tasks=self.min_bucket) for f in space.factors
                   if f.status == "experimental" and f.added_in <= space.version]
        passed: dict[str, str] = {}
        proposal = (self._propose(space, probes, passed) if feedback.with_learner_evidence
                    else self._evidence_free(space, feedback, probes, round, passed))
        new_space = apply_reflection(space, reviews, proposal, round=round, probes=probes)
        proposals = [proposal] if proposal else [Proposal(action="no_change", reason=self._why_not(feedback))]
        proposals += [Proposal(action="no_change", dimension_name=name, reason=f"passed over: {why}")
                      for name, why in passed.items() if proposal is None or name != proposal.dimension_name]
        summary = "; ".join([f"{r.decision.replace('_', ' ')} {r.dimension}" for r in reviews]
                            + [f"added {proposal.dimension_name} ({proposal.reason})" if proposal else
                               "no new factor: " + proposals[0].reason])
        reflection = Reflection(run_id=feedback.run_id, round=round, space_version=space.version,
                                round_id=f"{feedback.run_id}/r{round}", synthesis_space_version_in=space.version,
                                synthesis_space_version_out=new_space.version, dimension_reviews=reviews,
                                new_proposals=proposals, summary=summary,
                                steering="new_factor" if proposal else "learner_feedback")
        return reflection, new_space

    def _candidates(self, space: SynthesisSpace, probes: list[Probe], passed: dict[str, str]) -> list[Probe]:
        """Probes the Reflector may promote; every other probe outside the space goes to ``passed`` with why."""
        keys = {f.key for f in space.factors}  # a deprecated factor too: it is never proposed again
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

    def _propose(self, space: SynthesisSpace, probes: list[Probe], passed: dict[str, str]) -> Proposal | None:
        """The candidate with the strongest learner evidence (module doc), or None when none shows any."""
        ranked: list[Evidence] = []
        for p in self._candidates(space, probes, passed):
            e = evidence(p)
            if e.effect > 0:
                ranked.append(e)
            else:
                passed[p.probe] = ("no learner evidence: no bucket fails more than its others"
                                   + (f" ({p.support} diagnostic tasks)" if p.support else " (no diagnostic task)"))
        ranked.sort(key=Evidence.rank_key)
        for i, e in enumerate(ranked[1:], start=2):
            passed[e.probe.probe] = f"ranked {i} of {len(ranked)} by learner evidence: " + e.describe()
        if not ranked:
            return None
        best = ranked[0]
        return Proposal(action="promote_probe_to_dimension", dimension_name=best.probe.suggested_factor,
                        values=best.probe.suggested_values,
                        reason="coverage-gap-driven" if best.gap_fails_more else "failure-driven",
                        evidence=f"ranked 1 of {len(ranked)} by learner evidence: " + best.describe())

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

    def _why_not(self, feedback: Feedback) -> str:
        if not feedback.with_learner_evidence:
            return "no learner evidence, and no controllable property left outside the space"
        return ("no controllable property outside the space shows learner evidence (no bucket fails more than "
                "its others): the Designer reallocates within the space")


def apply_reflection(space: SynthesisSpace, reviews: list[DimensionReview], proposal: Proposal | None, *,
                     round: int, probes: list[Probe] = ()) -> SynthesisSpace:
    """The next space version (or the same one when nothing changed). A factor added now keeps, as its
    ``baseline``, the learner's success on the values that fail more than its others in ``probes`` (this round's
    evidence), which its later reviews compare with."""
    factors = [f.model_copy() for f in space.factors]
    changes = [SpaceChange(kind={"promote": "promote", "deprecate": "deprecate"}.get(r.decision, "keep_experimental"),
                           factor=r.dimension, reason=r.reason, evidence=r.evidence) for r in reviews]
    for r in reviews:
        for f in factors:
            if f.key == r.dimension and r.decision in ("promote", "deprecate"):
                f.status = "standard" if r.decision == "promote" else "deprecated"
    if proposal is not None and proposal.action == "promote_probe_to_dimension":
        probe = next((p for p in probes if p.probe == proposal.dimension_name), None)
        factors.append(Factor(key=proposal.dimension_name, values=proposal.values, status="experimental",
                              observable=True, added_in=space.version + 1, baseline=baseline(probe, round),
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
