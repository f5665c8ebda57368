"""The Reflector as an LLM (App. D): the audit package it reads, the output schema, and the checks that keep its
reply to at most one realizable change (seed factors never touched). The embedded rules are ``evosyn.agents.reflector``."""
from __future__ import annotations

import functools
from typing import Annotated, Union

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model

from evosyn.agents.reflector import apply_reflection
from evosyn.storage.records import DimensionReview, Factor, Feedback, Probe, Proposal, Reflection, SynthesisSpace


class ReflectorOut(BaseModel):
    """The App. D output schema."""

    model_config = ConfigDict(extra="forbid")
    round_id: str = ""
    synthesis_space_version_in: Union[int, str] = 0
    dimension_reviews: list[DimensionReview] = Field(default_factory=list)
    new_proposals: list[Proposal] = Field(default_factory=list)
    summary: str = ""


@functools.lru_cache(maxsize=64)
def reflector_output(experimental: tuple[str, ...], names: tuple[str, ...]) -> type[ReflectorOut]:
    """``ReflectorOut`` whose JSON schema says what this round allows (a constraining server then cannot
    write more): a review per experimental factor at most, naming one of them (``experimental``); one proposal
    at most (one change a round, App. D), naming a probe's suggested factor or an experimental factor
    (``names``). What the schema allows may still be refused by ``parse_reflector`` (e.g. the wrong buckets)."""
    review = DimensionReview.model_json_schema()
    if experimental:
        review["properties"]["dimension"] = {"type": "string", "enum": list(experimental)}
    proposal = Proposal.model_json_schema()
    proposal["properties"]["dimension_name"] = {"type": "string", "enum": ["", *names]}
    reviews = {"type": "array", "items": review, "maxItems": len(experimental)}
    proposals = {"type": "array", "items": proposal, "maxItems": 1}
    # the same class name: the name the reply schema goes by (OpenAI's json_schema name, Anthropic's answer tool)
    return create_model("ReflectorOut", __base__=ReflectorOut, __module__=__name__,
                        dimension_reviews=(Annotated[list[DimensionReview], WithJsonSchema(reviews)],
                                           Field(default_factory=list)),
                        new_proposals=(Annotated[list[Proposal], WithJsonSchema(proposals)],
                                       Field(default_factory=list)))


def output_for(space: SynthesisSpace, probes: list[Probe]) -> type[ReflectorOut]:
    experimental = tuple(f.key for f in space.factors if f.status == "experimental")
    suggested = sorted({q.suggested_factor for q in probes if q.suggested_factor and not q.in_space})
    return reflector_output(experimental, tuple(dict.fromkeys([*suggested, *experimental])))


NO_EVIDENCE = ("NOTE: no learner evidence is available this round (no-feedback control). Only the coverage of the "
               "synthesized data is shown; learner success and failure association are withheld. Without evidence "
               "every controllable property outside the space is equally supported: add one of them this round, and "
               "keep every experimental factor experimental (there is no evidence to review it by).")


_r = round  # the builtin (``round`` is a parameter below)


def reflector_messages(space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int,
                       previous: list[Reflection] | None = None, evidence: bool = True) -> list[dict]:
    """The audit package; with ``evidence=False`` (App. B.6 control) every learner-side number is left out."""
    from evosyn.agents.ask import render

    cov = {(s.factor, s.value): s for s in feedback.coverage}
    perf = {(s.factor, s.value): s for s in feedback.performance}
    report = {}
    for key in sorted(set(cov) | set(perf)):
        row = {"coverage": f"{cov[key].coverage:.2f} ({cov[key].count} examples)"
               if key in cov and cov[key].coverage is not None else "n/a"}
        if evidence and key in perf and perf[key].success_rate is not None:
            p = perf[key]
            row["task_agent_performance"] = f"{p.success_rate:.2f} on {p.count} tasks"
            row["before_after_training_change"] = f"{p.delta:+.2f}" if p.delta is not None else "n/a"
        report[f"{key[0]}={key[1]}"] = row
    probe_view = {}
    for p in probes:
        row = {"distribution": {b.bucket: b.count for b in p.buckets}, "coverage_gap": _r(p.coverage_gap, 3),
               "in_space": p.in_space,
               "suggested_factor": {"name": p.suggested_factor, "values": p.suggested_values}}
        if evidence:
            row["failure_correlation"] = {
                "cmi_given_space_nats": _r(p.cmi_given_space, 4), "permutation_p_value": _r(p.p_value, 4),
                "diagnostic_tasks": p.support, "residual_given_tool_tertile": _r(
                    p.residual_cmi, 4), "nmi_with_tool_tertiles": _r(p.nmi_tool_tertiles, 3),
                "failure_rate_by_bucket": {b.bucket: None if b.failure_rate is None else _r(b.failure_rate, 3)
                                           for b in p.buckets}}
        probe_view[p.probe] = row
    experimental = [_experimental(f, probes, evidence) for f in space.factors if f.status == "experimental"]
    prev = [{"round": r.round, "summary": r.summary,
             "reviews": [f"{d.dimension}: {d.decision}" for d in r.dimension_reviews]} for r in previous or []]
    text = render("reflector.md", version=str(space.version),
                  space={f.key: {"values": f.values, "status": f.status} for f in space.factors},
                  performance=report, probes=probe_view, experimental=experimental or "none",
                  previous=prev or "none", evidence_note="" if evidence else NO_EVIDENCE,
                  round_id=f"{feedback.run_id}/r{round}")
    return [{"role": "user", "content": text}]


def _experimental(f: Factor, probes: list[Probe], evidence: bool) -> dict:
    """An experimental factor as the audit package shows it; with evidence, the learner's success on the values
    it was added for, then and now (what its review decides on)."""
    row = {"key": f.key, "values": f.values, "added_in": f.added_in, "guidance": f.guidance}
    base = f.baseline
    if evidence and base is not None and base.values:
        now = next((p for p in probes if p.probe == f.key), None)
        counts = {b.bucket: b for b in now.buckets} if now is not None else {}
        tasks = sum(counts[v].count for v in base.values if v in counts)
        wins = sum(counts[v].count - round((counts[v].failure_rate or 0.0) * counts[v].count)
                   for v in base.values if v in counts)
        row["targeted_values"] = base.values
        row["success_when_added"] = f"{base.successes}/{base.tasks} (round {base.round})"
        row["success_now"] = f"{wins}/{tasks}"
    return row


def parse_reflector(out: ReflectorOut, space: SynthesisSpace, probes: list[Probe], *, max_buckets: int = 6
                    ) -> tuple[list[DimensionReview], Proposal | None]:
    """Reviews of experimental factors and at most one realizable change; seed factors are never touched."""
    from evosyn.agents.ask import Invalid

    by_key = {f.key: f for f in space.factors}
    seen = set()
    for r in out.dimension_reviews:
        f = by_key.get(r.dimension)
        if f is None:
            raise Invalid(f"dimension_reviews names {r.dimension!r}, which is not a factor of the space")
        if f.status != "experimental":
            raise Invalid(f"dimension_reviews may only review experimental factors; {r.dimension!r} is {f.status}")
        if r.dimension in seen:
            raise Invalid(f"dimension_reviews reviews {r.dimension!r} twice")
        seen.add(r.dimension)
    changes = [p for p in out.new_proposals if p.action != "no_change"]
    if len(changes) > 1:
        raise Invalid(f"at most one new factor or value per round, got {len(changes)} proposals")
    if not changes:
        return out.dimension_reviews, None
    p = changes[0]
    if p.action == "add_value":
        f = by_key.get(p.dimension_name)
        if f is None:
            raise Invalid(f"add_value names {p.dimension_name!r}, which is not a factor of the space")
        if f.status in ("seed", "standard"):
            raise Invalid(f"add_value would change the meaning of the {f.status} factor {f.key!r}; only experimental "
                          f"factors may gain values")
        new = [v for v in p.values if v not in f.values]
        if not new or len(f.values) + len(new) > max_buckets:
            raise Invalid(f"add_value must add 1..{max_buckets - len(f.values)} new values to {f.key!r}")
        return out.dimension_reviews, p.model_copy(update={"values": new})
    if p.dimension_name in by_key:
        raise Invalid(f"{p.dimension_name!r} is already a factor: existing factors are never renamed or redefined")
    realizable = {q.suggested_factor: q for q in probes if q.suggested_factor and not q.in_space}
    if p.dimension_name not in realizable:
        raise Invalid(f"a new factor must be a probe's suggested factor (realizable by the generator and "
                      f"measurable by the verifier): one of {sorted(realizable) or 'none'}")
    want = realizable[p.dimension_name].suggested_values
    if list(p.values) != list(want):
        raise Invalid(f"{p.dimension_name} must keep the probe's buckets {want}, got {p.values}")
    if not 2 <= len(want) <= max_buckets:
        raise Invalid(f"a new factor needs 2..{max_buckets} values")
    return out.dimension_reviews, p


class LLMReflector:
    """The Reflector as an LLM. ``learner_evidence=False`` is the App. B.6 no-feedback control: the same
    prompt with every learner-side number withheld (also applied when the feedback carries none)."""

    def __init__(self, client, retries: int = 2, learner_evidence: bool = True,
                 previous: list[Reflection] | None = None, fail: bool = True):
        self.fail = fail  # on_invalid: fail stops the run; fallback keeps the space, recorded and warned about
        self.client, self.retries, self.learner_evidence = client, retries, learner_evidence
        self.previous = previous or []
        self.raw = ""

    def reflect(self, space: SynthesisSpace, feedback: Feedback, probes: list[Probe], *, round: int
                ) -> tuple[Reflection, SynthesisSpace]:
        from evosyn.agents.ask import RoleRejected, ask

        evidence = self.learner_evidence and feedback.with_learner_evidence
        msgs = reflector_messages(space, feedback, probes, round=round, previous=self.previous, evidence=evidence)
        try:
            ans = ask(self.client, msgs, schema=output_for(space, probes), role="reflector", retries=self.retries,
                      validate=lambda out: parse_reflector(out, space, probes))
            (reviews, proposal), summary = ans.value, ans.parsed.summary
            self.raw = ans.raw
        except RoleRejected as exc:  # no silent fallback: stop (on_invalid: fail), or keep the space, warned
            from evosyn.agents.ask import RoleInvalid, fallback_note

            if self.fail:
                raise RoleInvalid("reflector", getattr(self.client, "endpoint", "?"), str(exc)) from None
            self.client.record_fallback(str(exc), "reflector")
            reviews, proposal, summary = [], None, (f"{fallback_note('reflector', 'space kept')}: LLM reflector "
                                                    f"output rejected: {exc}")
        new_space = apply_reflection(space, reviews, proposal, round=round, probes=probes)
        proposals = [proposal] if proposal else [Proposal(action="no_change", reason=summary[:300])]
        added = proposal is not None and proposal.action == "promote_probe_to_dimension"
        reflection = Reflection(run_id=feedback.run_id, round=round, space_version=space.version,
                                round_id=f"{feedback.run_id}/r{round}", synthesis_space_version_in=space.version,
                                synthesis_space_version_out=new_space.version, dimension_reviews=reviews,
                                new_proposals=proposals, summary=summary or "reallocation only",
                                steering="new_factor" if added else "learner_feedback")
        return reflection, new_space
