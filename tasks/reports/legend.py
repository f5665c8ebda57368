"""What each metric of `evosyn report` and `evosyn compare` measures: one entry per metric name.

Every table of the report, the compare table and its JSON use these names and labels, so a number
shown under one name is the same number everywhere (App. B of the paper for the definitions).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    label: str  # the column heading a reader sees
    means: str
    range: str
    better: str  # "higher", "lower", or "-" (descriptive: neither direction is better)


METRICS: dict[str, Metric] = {
    "domain": Metric("domain", "the domain pack of the run", "-", "-"),
    "arm": Metric("arm", "the ablation arm (evosyn = full loop; static = fixed space, no feedback)", "-", "-"),
    "seed": Metric("seed", "the run's random seed", "-", "-"),
    "round": Metric("round", "the loop round (1 = first synthesized data)", "1..rounds", "-"),
    "verified": Metric("verified", "verified tasks so far (rounds <= this one), one per task", ">= 0", "higher"),
    "verified_new": Metric("verified (round)", "tasks first verified in this round", ">= 0", "higher"),
    "success_diagnostic": Metric(
        "diagnostic success", "learner success rate on the diagnostic set (held-out verified tasks of the run's "
        "own rounds; it grows each round)", "0..1", "higher"),
    "success_test": Metric(
        "test success", "learner success rate on the official-matched test set (synthetic tasks whose joint "
        "task family / outcome / write / read counts follow tau2's official tasks; the same tasks for every run "
        "and round of a domain)", "0..1", "higher"),
    "success_test_uniform": Metric(
        "uniform test success", "learner success rate on the uniform test set (every property the generator "
        "controls drawn uniformly; the same tasks for every run and round of a domain)", "0..1", "higher"),
    "success_test_ci": Metric(
        "test success 95% CI", "Wilson score interval of the test score over its test tasks (the scored set's: "
        "official-matched, or uniform for a domain with no official tasks; pooled over the arm's seeds when "
        "comparing)", "0..1", "-"),
    "success_test_scored": Metric(
        "test score", "the round's test score: the official-matched set's success, or the uniform set's for a "
        "domain with no official tasks (shown as test (uniform))", "0..1", "higher"),
    "test_set_scored": Metric(
        "test set scored", "which fixed test set the test score is of: official-matched, or uniform (a domain "
        "with no official tasks has no official-matched set)", "-", "-"),
    "overlap_test": Metric(
        "test overlap", "share of the tasks the learner trained on (rounds <= this one) flagged by dedup as near "
        "copies of an official-matched test-set task: above 10% a warning says the score may overstate",
        "0..1", "lower"),
    "overlap_test_uniform": Metric(
        "uniform test overlap", "share of the tasks the learner trained on (rounds <= this one) flagged by dedup "
        "as near copies of a uniform test-set task: above 10% a warning says the score may overstate",
        "0..1", "lower"),
    "overlap_test_sets": Metric(
        "test-set overlap", "share of the tasks the learner trained on (rounds <= this one) that nearly copy a "
        "task of either test set", "0..1", "lower"),
    "factor_coverage": Metric(
        "factor coverage", "mean over observed factors of the share of reference values seen in the verified "
        "data (Eq. 23)", "0..1", "higher"),
    "factor_balance": Metric(
        "factor balance", "mean over observed factors of the normalized entropy of their values in the "
        "verified data (Eq. 24)", "0..1", "higher"),
    "interaction_coverage": Metric(
        "interaction coverage", "mean over interaction templates (factor pairs) of the share of value pairs "
        "seen (Eq. 25)", "0..1", "higher"),
    "trajectory_diversity": Metric(
        "trajectory diversity (own)", "entropy of the trajectory patterns of the verified data, normalized by "
        "log of the number of patterns this run has verified so far (Eq. 26 with the run's own patterns). "
        "This is the value of the run summary and MLflow; compare runs with the union value", "0..1", "higher"),
    "trajectory_diversity_union": Metric(
        "trajectory diversity (union)", "the same entropy normalized by log |P_union|, the patterns of every "
        "compared run of the domain over all rounds (Eq. 26): comparable across the runs of one table",
        "0..1", "higher"),
    "trajectory_patterns": Metric("trajectory patterns", "distinct trajectory patterns in the verified data",
                                  ">= 0", "higher"),
    "distinct_tool_sequences": Metric(
        "distinct tool sequences", "distinct gold tool-call sequences in the verified data (App. B.9)", ">= 0",
        "higher"),
    "distinct_size_matched": Metric(
        "distinct sequences (size-matched)", "distinct tool-call sequences of the final pool, subsampled to "
        "the smallest final pool of the compared runs of the domain (mean of 200 draws; App. B.9); final "
        "round only", ">= 0", "higher"),
    "gap_allocation_spearman": Metric(
        "gap vs allocation (Spearman)", "Spearman rho over slices between the previous round's failure gap "
        "(1 - success) and the change in the slice's share of verified data: does the data go where the "
        "learner is weak? (B.5; undefined in round 1)", "-1..1", "higher"),
    "allocation_gain_spearman": Metric(
        "allocation vs gain (Spearman)", "Spearman rho over slices between the share change and the "
        "diagnostic success change of the slice (B.8; undefined in round 1)", "-1..1", "higher"),
    "targeted_improvement_rate": Metric(
        "targeted improvement rate", "of the weak slices whose share grew by >= 5 points, the fraction whose "
        "diagnostic success rose (B.8; undefined when none was targeted)", "0..1", "higher"),
    "success_gain_per_1k": Metric(
        "test gain per 1K examples", "test success change from the previous round per 1,000 verified training "
        "examples added in this round (B.12; on the uniform set for a domain with no official tasks)", "any", "higher"),
    "share_num_write_3plus": Metric(
        "share 3+ writes", "share of this round's verified tasks whose gold solution writes 3 or more times",
        "0..1", "-"),
    "runs": Metric("runs", "runs (seeds) of the arm that reached this round (final-round means: runs averaged)",
                   ">= 1", "-"),
    "task_set": Metric("task set", "test (fixed, shared by every run of the domain) or diagnostic (the run's own "
                       "held-out verified tasks)", "-", "-"),
    "n": Metric("n", "evaluated tasks, pooled over the arm's runs", ">= 0", "-"),
    "success": Metric("success", "success rate of the pooled evaluations (per arm, round and task set)", "0..1",
                      "higher"),
    "ci_low": Metric("95% CI low", "lower bound of the 95% Wilson score interval of the pooled success", "0..1",
                     "-"),
    "ci_high": Metric("95% CI high", "upper bound of the 95% Wilson score interval of the pooled success", "0..1",
                      "-"),
    "slice_success": Metric(
        "slice success", "test success of the tasks in one slice (a value of task_family, expected_outcome, "
        "num_write or num_read, observed on the test task's gold solution)", "0..1", "higher"),
    "allocation": Metric(
        "allocation", "blueprints the Designer's directions asked for, per value of a factor (preferred or "
        "allowed values; a direction naming several values is split evenly between them, one naming none "
        "counts as (any))", ">= 0", "-"),
    "probe_failure_rate": Metric(
        "probe failure rate", "diagnostic failure rate of the tasks in one bucket of a probe (a measured "
        "property of the gold solution, e.g. its number of writes)", "0..1", "lower"),
    "cmi_given_space": Metric(
        "I(Y;d|O)", "conditional mutual information (nats) between failure and a probe given the current "
        "space's stratum (B.10): failure information the space does not yet explain", ">= 0", "-"),
    "checked_set": Metric("checked", "what the dedup check read: a round's verified tasks, or a test set", "-", "-"),
    "checked": Metric("tasks checked", "tasks the dedup check compared (a round's verified tasks, or a test set's)",
                      ">= 0", "-"),
    "flagged": Metric("flagged", "checked tasks that copy another by either test (any flag below)", ">= 0", "lower"),
    "duplicate": Metric("near copies", "flagged as a near copy of an earlier task of the same run (or test set): "
                        "the same gold actions, with a near instruction (MinHash Jaccard >= the threshold) or a "
                        "state change", ">= 0", "lower"),
    "official": Metric("copies of official tasks", "flagged as a near copy of an official task of the domain "
                       "outside its test split", ">= 0", "lower"),
    "official_test": Metric("copies of official test tasks", "flagged as a near copy of a task of tau2's official "
                            "test split: a score on that split would be contaminated", ">= 0", "lower"),
    "test_set": Metric("copies of test-set tasks", "flagged as a near copy of a task of the fixed test sets the run "
                       "is scored on", ">= 0", "lower"),
}


def label(name: str) -> str:
    return METRICS[name].label if name in METRICS else name


def legend(names) -> list[dict[str, str]]:
    """One row per known metric among ``names``, in their order: name, label, means, range, better."""
    return [{"name": n, "label": METRICS[n].label, "means": METRICS[n].means, "range": METRICS[n].range,
             "better": METRICS[n].better} for n in dict.fromkeys(names) if n in METRICS]
