"""Feedback statistics, probes and the embedded Reflector's decisions on controlled evidence."""
import math
import random

import pytest

from evosyn.agents.feedback import FeedbackInputs, build_feedback, probe_report, wilson
from evosyn.agents.probes import TaskProfile, conditional_mi, entropy, mutual_information, nmi
from evosyn.agents.reflector import EmbeddedReflector
from evosyn.envs.packs import get_pack
from evosyn.storage.records import Evaluation, Message, ToolCall

AIRLINE = get_pack("airline")  # the pack of the ``space`` fixture


def test_information_measures():
    xs = [0, 0, 1, 1] * 25
    assert mutual_information(xs, xs) == pytest.approx(math.log(2))
    assert mutual_information(xs, [0, 1] * 50) == pytest.approx(0.0, abs=1e-12)
    assert conditional_mi(xs, xs, ["a"] * 100) == pytest.approx(math.log(2))
    assert conditional_mi(xs, xs, xs) == pytest.approx(0.0)  # nothing left once you know the condition
    assert nmi(xs, xs) == pytest.approx(1.0)
    lo, hi = wilson(8, 10)
    assert 0.44 < lo < 0.5 and 0.94 < hi < 0.98


def test_library_statistics_match_hand_computed_values():
    """The scipy / sklearn calls give the plug-in values worked out by hand (nats, sqrt-normalized NMI)."""
    xs, ys = [0, 0, 1, 1], ["a", "a", "a", "b"]
    hx = math.log(2)
    hy = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    hxy = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))  # (0,a) 2/4, (1,a) 1/4, (1,b) 1/4
    assert entropy(ys) == pytest.approx(hy) and entropy([]) == 0.0
    assert mutual_information(xs, ys) == pytest.approx(hx + hy - hxy)
    assert nmi(xs, ys) == pytest.approx((hx + hy - hxy) / math.sqrt(hx * hy))  # geometric mean, as before
    assert nmi([1, 1], [2, 2]) == 0.0 and nmi([1, 2], [3, 3]) == 0.0  # a constant side carries nothing
    # CMI keeps its own weighting: p(z) times each stratum's MI; tuple labels (strata) work too
    zs = [("s", 1)] * 4 + [("t", 2)] * 6
    # stratum t: x determines y (MI = ln 2); stratum s: the pair above
    cmi = conditional_mi(xs + xs + [0, 1], ys + ["a", "a", "b", "b", "a", "b"], zs)
    assert cmi == pytest.approx(0.4 * (hx + hy - hxy) + 0.6 * math.log(2))
    # Wilson at z = 1.96 by the closed form: p = 0.8, n = 10
    z, p, n = 1.959964, 0.8, 10
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert wilson(8, 10) == pytest.approx((centre - half, centre + half), abs=1e-6)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0 and wilson(0, 0) == (0.0, 1.0)


def test_wilson_is_scipys_interval_and_no_trials_is_the_whole_range():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    narrow, wide = wilson(30, 60, confidence=0.8), wilson(30, 60, confidence=0.99)
    assert wide[0] < narrow[0] < 0.5 < narrow[1] < wide[1]  # the confidence level reaches scipy
    # no trials: no evidence, so every rate fits (scipy itself refuses n = 0), at any confidence
    assert wilson(0, 0) == wilson(0, 0, confidence=0.5) == (0.0, 1.0)


def test_reports_and_feedback_share_one_wilson():
    from evosyn.tasks.reports import data as report_data

    assert report_data.wilson is wilson


def population(n=240, seed=0, fail_on_writes=True):
    """Tasks where failure depends on the number of writes (or on nothing), within every stratum."""
    rng = random.Random(seed)
    profiles, values, evals = {}, {}, []
    for i in range(n):
        tid = f"t{i}"
        writes = rng.choice(["0", "1", "2", "3-4", "5+"])
        family = rng.choice(["flight_change", "flight_cancellation"])
        calls = [Message(role="assistant", tool_calls=[ToolCall(id=f"c{k}", name="get_user_details",
                                                                 arguments={"user_id": "u"})]) for k in range(3)]
        profiles[tid] = TaskProfile(tid, {"num_write": [writes], "num_read": ["2"], "computation": ["none"],
                                          "trajectory_pattern": ["R-W"], "state_change_type": ["modify"]},
                                    (family, "fulfill", "easy"), calls)
        values[tid] = {"task_family": [family], "expected_outcome": ["fulfill"], "difficulty_profile": ["easy"]}
        p_fail = {"0": 0.1, "1": 0.2, "2": 0.5, "3-4": 0.9, "5+": 0.95}[writes] if fail_on_writes else 0.4
        evals.append(Evaluation(run_id="r", round=1, evaluation_id=f"e{i}", task_id=tid, trajectory_id="x",
                                model_version="m", task_set="diagnostic", success=rng.random() > p_fail, reward=0.0))
    return profiles, values, evals


def inputs(space, evidence=True, **kw):
    profiles, values, evals = population(**kw)
    return FeedbackInputs(space=space, values=values, evaluations=evals, verified=sorted(profiles),
                          profiles=profiles, with_learner_evidence=evidence)


def varied(inp, seed=0):
    """``inp`` with every trajectory property but ``num_write`` drawn at random, independently of failure."""
    from evosyn.envs.properties import PROPERTIES

    rng = random.Random(seed)
    for prof in inp.profiles.values():
        prof.observed.update({k: [rng.choice(p.values)] for k, p in PROPERTIES.items() if k != "num_write"})
    return inp


def test_probe_report_finds_the_failure_driver(space):
    probes = {p.probe: p for p in probe_report(inputs(space), AIRLINE, run_id="r", round=1)}
    assert probes["num_write"].cmi_given_space > 0.1
    assert probes["num_write"].cmi_given_space > 5 * probes["transfers"].cmi_given_space
    rates = [b.failure_rate for b in probes["num_write"].buckets]
    assert rates == sorted(rates) and probes["num_write"].suggested_values == ["0", "1", "2", "3-4", "5+"]
    flat = {p.probe: p for p in probe_report(inputs(space, fail_on_writes=False), AIRLINE, run_id="r", round=1)}
    assert flat["num_write"].cmi_given_space < 0.05


def test_feedback_slices_with_intervals(space):
    fb = build_feedback(inputs(space), run_id="r", round=1, model_version="m")
    fam = [s for s in fb.performance if s.factor == "task_family"]
    assert sum(s.count for s in fam) == 240 and all(s.ci_low <= s.success_rate <= s.ci_high for s in fam)
    cov = {s.value: s.coverage for s in fb.coverage if s.factor == "expected_outcome"}
    assert cov == {"fulfill": 1.0, "refuse": 0.0}


def test_reflector_adds_one_failure_driven_factor_and_keeps_seeds(space):
    inp = inputs(space)
    fb = build_feedback(inp, run_id="r", round=1, model_version="m")
    reflection, nxt = EmbeddedReflector().reflect(space, fb, probe_report(inp, AIRLINE, run_id="r", round=1), round=1)
    added = [c for c in nxt.diff if c.kind == "add_factor"]
    assert len(added) == 1 and added[0].factor == "num_write" and "failure" in reflection.summary
    assert nxt.version == space.version + 1 and nxt.factor("num_write").status == "experimental"
    assert [f.key for f in nxt.factors[:6]] == [f.key for f in space.factors]
    assert all(f.status == "seed" for f in nxt.factors[:6])
    assert reflection.new_proposals[0].action == "promote_probe_to_dimension"
    assert "I(Y_fail; num_write | O_r)" in reflection.new_proposals[0].evidence
    # the values it is added for: the buckets that fail more than the others, with the learner's success there
    base = nxt.factor("num_write").baseline
    assert "5+" in base.values and "3-4" in base.values and "0" not in base.values and base.round == 1
    assert 0 < base.successes < base.tasks / 2


def test_without_learner_evidence_the_control_draws_one_controllable_property(space):
    """App. B.6: the no-feedback control revises the space without evidence: a seeded uniform draw among the
    controllable properties not in the space, the same whatever the learner's failures are."""
    drawn = {}
    for fail_on_writes in (True, False):
        for run in ("a", "b", "c", "d", "e", "f"):
            inp = inputs(space, evidence=False, fail_on_writes=fail_on_writes)
            fb = build_feedback(inp, run_id=run, round=1, model_version="m")
            probes = probe_report(inp, AIRLINE, run_id=run, round=1)
            reflection, nxt = EmbeddedReflector().reflect(space, fb, probes, round=1)
            added = [c.factor for c in nxt.diff if c.kind == "add_factor"]
            assert len(added) == 1 and added[0] in AIRLINE.controllable
            assert reflection.new_proposals[0].reason == "evidence-free draw"
            assert drawn.setdefault(run, added[0]) == added[0]  # seeded by run and round, blind to the failures
            passed = {p.dimension_name: p.reason for p in reflection.new_proposals[1:]}
            assert "turns" in passed and "cannot control" in passed["turns"]
    assert len(set(drawn.values())) > 1


def test_statistics_rank_the_candidates_and_gate_nothing(space):
    """Item 1 of issue 43: every candidate with excess failure is ranked (the strongest p-value first) and the
    best is added even where no test would pass; a candidate without excess failure is passed over as such."""
    inp = inputs(space)
    fb = build_feedback(inp, run_id="r", round=1, model_version="m")
    probes = probe_report(inp, AIRLINE, run_id="r", round=1)
    reflection, _ = EmbeddedReflector().reflect(space, fb, probes, round=1)
    passed = {p.dimension_name: p.reason for p in reflection.new_proposals[1:]}
    assert "num_write" not in passed and "no learner evidence" in passed["num_read"]  # one bucket: nothing to compare
    assert "cannot control" in passed["transfers"]
    inp = varied(inputs(space))  # the other properties vary by chance: each shows some excess failure, weaker
    fb = build_feedback(inp, run_id="r", round=1, model_version="m")
    reflection, nxt = EmbeddedReflector().reflect(space, fb, probe_report(inp, AIRLINE, run_id="r", round=1), round=1)
    assert [c.factor for c in nxt.diff if c.kind == "add_factor"] == ["num_write"]
    passed = {p.dimension_name: p.reason for p in reflection.new_proposals[1:]}
    ranks = sorted(int(r.split()[3]) for r in passed.values() if "by learner evidence" in r)
    assert len(ranks) >= 2 and ranks == list(range(2, len(ranks) + 2))  # "passed over: ranked k of m ..."
    # the same evidence on 12 tasks: no test passes (the old Holm gate added nothing), one factor is still added
    small = inputs(space, n=12)
    fb = build_feedback(small, run_id="r", round=1, model_version="m")
    small_probes = probe_report(small, AIRLINE, run_id="r", round=1)
    assert min(p.p_value for p in small_probes if p.suggested_factor) > 0.05 / 9
    _, nxt = EmbeddedReflector().reflect(space, fb, small_probes, round=1)
    assert sum(c.kind == "add_factor" for c in nxt.diff) == 1
    # a learner that fails nowhere (or everywhere) shows no evidence anywhere: nothing is added
    for outcome in (True, False):
        flat = FeedbackInputs(**{**inp.__dict__, "evaluations": [e.model_copy(update={"success": outcome})
                                                                 for e in inp.evaluations]})
        fb = build_feedback(flat, run_id="r", round=1, model_version="m")
        probes = probe_report(flat, AIRLINE, run_id="r", round=1)
        reflection, same = EmbeddedReflector().reflect(space, fb, probes, round=1)
        assert same.version == space.version and "no new factor" in reflection.summary


def test_permutation_p_value_is_seeded_and_calibrated():
    from evosyn.agents.probes import permutation_p

    rng = random.Random(1)
    noise = [(rng.random() < 0.4, rng.choice("abc"), rng.choice("xy")) for _ in range(150)]
    ys, xs, zs = zip(*noise)
    p = permutation_p(ys, xs, zs, key="k")
    assert p == permutation_p(ys, xs, zs, key="k") and p > 0.05
    ys2 = [x == "a" for x in xs]  # failure is the bucket
    assert permutation_p(ys2, xs, zs, key="k") == pytest.approx(1 / 1000)
    assert permutation_p([1, 1, 1], ["a", "b", "c"], ["z"] * 3, key="k") == 1.0


def test_the_factor_added_is_reviewed_in_the_next_round(space):
    inp = inputs(space)
    fb = build_feedback(inp, run_id="r", round=1, model_version="m")
    _, v2 = EmbeddedReflector().reflect(space, fb, probe_report(inp, AIRLINE, run_id="r", round=1), round=1)
    inp2 = inputs(v2, seed=1)
    fb2 = build_feedback(inp2, run_id="r", round=2, model_version="m")
    reflection, v3 = EmbeddedReflector().reflect(v2, fb2, probe_report(inp2, AIRLINE, run_id="r", round=2), round=2)
    review = next(r for r in reflection.dimension_reviews if r.dimension == "num_write")
    assert review.decision in ("promote", "deprecate") and "one-sided Fisher p" in review.evidence
    assert v3.factor("num_write").status == {"promote": "standard", "deprecate": "deprecated"}[review.decision]
    assert review.decision.replace("_", " ") + " num_write" in reflection.summary
    assert sum(c.kind == "add_factor" for c in v3.diff) <= 1


def _reviewed(space, failures_then, failures_now, tasks_then=20, tasks_now=20):
    """The review of ``num_write`` added for its buckets 3-4 and 5+ (``failures_then`` of ``tasks_then``
    failing), with ``failures_now`` of ``tasks_now`` failing there now."""
    from evosyn.storage.records import Baseline
    from tests.agents.conftest import with_factor

    v2 = with_factor(space, "num_write")
    f = v2.factor("num_write")
    f.baseline = Baseline(values=["3-4", "5+"], tasks=tasks_then, successes=tasks_then - failures_then, round=1)
    half = tasks_now // 2
    now = _probe("num_write", [(10, 0.1, 0.3), (10, 0.1, 0.3), (10, 0.2, 0.2),
                               (half, (failures_now / tasks_now) if tasks_now else None, 0.1),
                               (tasks_now - half, (failures_now / tasks_now) if tasks_now else None, 0.1)])
    now = now.model_copy(update={"buckets": [b.model_copy(update={"bucket": v}) for b, v in
                                             zip(now.buckets, ["0", "1", "2", "3-4", "5+"])]})
    fb = build_feedback(inputs(v2, n=36), run_id="r", round=2, model_version="m")
    reflection, v3 = EmbeddedReflector().reflect(v2, fb, [now], round=2)
    review = next(r for r in reflection.dimension_reviews if r.dimension == "num_write")
    return review, v3


def test_review_promotes_when_success_on_its_values_rose_deprecates_when_not_and_waits_when_thin(space):
    review, v3 = _reviewed(space, failures_then=16, failures_now=8)
    assert review.decision == "promote" and v3.factor("num_write").status == "standard"
    assert "0.20 (4/20, round 1) -> 0.60 (12/20), +0.40" in review.evidence
    review, v3 = _reviewed(space, failures_then=8, failures_now=8)  # no rise: its budget goes back to the space
    assert review.decision == "deprecate" and v3.factor("num_write").status == "deprecated"
    assert "num_write" not in {f.key for f in v3.active} and "num_write" in {f.key for f in v3.factors}
    assert "returns to the rest of the space" in review.reason
    for thin in ({"tasks_then": 4, "failures_then": 3}, {"tasks_now": 4, "failures_now": 0}):
        review, v3 = _reviewed(space, **{"failures_then": 16, "failures_now": 8, **thin})
        assert review.decision == "keep_experimental" and "too thin" in review.reason
        assert v3.factor("num_write").status == "experimental"


def test_a_deprecated_factor_is_never_proposed_again(space):
    review, v3 = _reviewed(space, failures_then=8, failures_now=10)
    assert review.decision == "deprecate"
    inp = inputs(v3)
    fb = build_feedback(inp, run_id="r", round=3, model_version="m")
    probes = probe_report(inp, AIRLINE, run_id="r", round=3)
    assert next(p for p in probes if p.probe == "num_write").in_space is False  # out of the active space
    _, v4 = EmbeddedReflector().reflect(v3, fb, probes, round=3)
    assert [c.factor for c in v4.diff if c.kind == "add_factor"] != ["num_write"]


def test_the_feedback_arm_expands_at_the_controls_rate(space):
    """Every arm adds at most one factor per round, and evosyn (with learner evidence) adds one in every round the
    no-feedback control does, until no controllable property is left outside the space."""
    spaces = {True: space, False: space}
    added: dict[bool, list[int]] = {True: [], False: []}
    for r in range(1, 8):
        for with_evidence in (True, False):
            sp = spaces[with_evidence]
            inp = varied(inputs(sp, evidence=with_evidence, seed=r, n=120), seed=r)
            fb = build_feedback(inp, run_id="r", round=r, model_version="m")
            probes = probe_report(inp, AIRLINE, run_id="r", round=r)
            reflection, nxt = EmbeddedReflector().reflect(sp, fb, probes, round=r)
            n = sum(c.kind == "add_factor" for c in nxt.diff) if nxt.version != sp.version else 0
            assert n <= 1 and len([p for p in reflection.new_proposals if p.action != "no_change"]) == n
            added[with_evidence].append(n)
            spaces[with_evidence] = nxt
    assert added[True] == added[False] and sum(added[True]) >= 3
    controllable = set(AIRLINE.controllable)
    for sp in spaces.values():
        assert {f.key for f in sp.factors if f.status != "seed"} <= controllable


def _probe(name, buckets, gap=1.0):
    """A probe with (diagnostic count, failure rate, coverage) per bucket."""
    from evosyn.storage.records import Probe, ProbeBucket

    return Probe(run_id="r", round=1, space_version=1, probe=name, coverage_gap=gap, suggested_factor=name,
                 suggested_values=[str(i) for i in range(len(buckets))],
                 buckets=[ProbeBucket(bucket=str(i), count=n, failure_rate=f, coverage=c)
                          for i, (n, f, c) in enumerate(buckets)])


def test_a_coverage_gap_needs_more_failure_in_its_under_covered_buckets(space):
    from evosyn.agents.probes import gap_failure_p

    # under-covered buckets (coverage below half a uniform share) fail 7 of 8, the others 6 of 28
    failing = _probe("num_write", [(14, 3 / 14, 0.5), (14, 3 / 14, 0.44), (0, None, 0.0), (8, 7 / 8, 0.06),
                                   (0, None, 0.0)])
    # one failing task in an uncovered bucket: some evidence, weaker than the other's
    thin = _probe("num_read", [(14, 4 / 14, 0.5), (14, 0.5, 0.45), (0, None, 0.0), (1, 1.0, 0.05), (0, None, 0.0)])
    assert gap_failure_p(failing) < 0.01 and gap_failure_p(thin) == 1.0
    fb = build_feedback(inputs(space, n=36), run_id="r", round=1, model_version="m")
    for order in ([failing, thin], [thin, failing]):
        reflection, nxt = EmbeddedReflector().reflect(space, fb, order, round=1)
        assert [c.factor for c in nxt.diff if c.kind == "add_factor"] == ["num_write"]
        assert "coverage-gap" in reflection.summary and "Fisher p" in reflection.new_proposals[0].evidence
    reflection, nxt = EmbeddedReflector().reflect(space, fb, [thin], round=1)  # no gate: the only evidence wins
    assert [c.factor for c in nxt.diff if c.kind == "add_factor"] == ["num_read"]
    assert "Fisher p = 1.0000" in reflection.new_proposals[0].evidence  # recorded, not a gate


def test_the_strongest_evidence_goes_first_and_a_failing_gap_wins_a_tie(space):
    covered = _probe("interleaved", [(18, 0.2, 0.5), (18, 0.8, 0.5)], gap=0.0).model_copy(
        update={"cmi_given_space": 0.12, "residual_cmi": 0.05, "p_value": 0.001, "support": 36})
    uncovered = _probe("write_mix", [(14, 3 / 14, 0.5), (14, 3 / 14, 0.44), (8, 7 / 8, 0.06)]).model_copy(
        update={"cmi_given_space": 0.004, "residual_cmi": 0.003, "p_value": 0.6, "support": 36})
    fb = build_feedback(inputs(space, n=36), run_id="r", round=1, model_version="m")
    from evosyn.agents.probes import gap_failure_p

    p_gap = gap_failure_p(uncovered)  # 7 of 8 failing in the gap, 6 of 28 elsewhere
    assert 0.001 < p_gap < 0.002  # weaker than the covered axis's permutation p of 0.001: the axis goes first
    for order in ([covered, uncovered], [uncovered, covered]):
        reflection, nxt = EmbeddedReflector().reflect(space, fb, order, round=1)
        assert [c.factor for c in nxt.diff if c.kind == "add_factor"] == ["interleaved"]
        assert reflection.new_proposals[0].reason == "failure-driven"
        passed = {p.dimension_name: p.reason for p in reflection.new_proposals[1:]}
        assert passed["write_mix"].startswith("passed over: ranked 2 of 2 by learner evidence")
        assert "Fisher p = 0.0013" in passed["write_mix"]
    # at equal strength the coverage gap the learner fails in goes first
    tie = covered.model_copy(update={"p_value": p_gap})
    for order in ([tie, uncovered], [uncovered, tie]):
        reflection, nxt = EmbeddedReflector().reflect(space, fb, order, round=1)
        assert [c.factor for c in nxt.diff if c.kind == "add_factor"] == ["write_mix"]
        assert reflection.new_proposals[0].reason == "coverage-gap-driven"
    # a gap the learner does not fail in more often is ranked by its association alone: the covered axis wins
    flat = uncovered.model_copy(update={"buckets": _probe("write_mix", [(14, 0.3, 0.5), (14, 0.2, 0.44),
                                                                        (8, 0.25, 0.06)]).buckets})
    reflection, nxt = EmbeddedReflector().reflect(space, fb, [covered, flat], round=1)
    assert [c.factor for c in nxt.diff if c.kind == "add_factor"] == ["interleaved"]
