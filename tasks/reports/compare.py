"""`evosyn compare`: every run (domain, arm, seed) x every round in one table, on shared normalizations.

Rows are grouped by domain, then arm, then seed; the per-arm means are per (domain, arm).

Trajectory diversity comes twice: ``trajectory_diversity`` normalized by the run's own
patterns so far (the value of the run summary and MLflow) and ``trajectory_diversity_union``
normalized by the union of patterns of all compared runs of the domain (all arms, seeds
and rounds), the one to compare runs by; size-matched distinct tool-call
sequences subsample each run's final pool to the smallest final pool of the
compared runs of its domain (App. B.9).
"""
from __future__ import annotations

import math
from pathlib import Path

from evosyn.storage import metrics as M
from evosyn.storage import atomic
from evosyn.storage.store import Store
from evosyn.tasks.reports.data import Envs
from evosyn.tasks.reports.legend import label, legend
from evosyn.tasks.metrics import intrinsic, pattern_union, round_metrics, verified_samples
from evosyn.tasks.overlap import overlap, overlap_warnings, scored_metrics

COLUMNS = ["domain", "arm", "seed", "round", "verified", "success_diagnostic", "success_test", "overlap_test",
           "success_test_uniform", "overlap_test_uniform", "success_test_scored", "factor_coverage",
           "factor_balance", "interaction_coverage", "trajectory_diversity", "trajectory_diversity_union",
           "distinct_tool_sequences", "distinct_size_matched", "gap_allocation_spearman", "allocation_gain_spearman",
           "targeted_improvement_rate", "success_gain_per_1k"]
MEAN_COLUMNS = COLUMNS[COLUMNS.index("success_diagnostic"):]
KEY_COLUMNS = COLUMNS[:COLUMNS.index("verified")]
LEARNER_COLUMNS = ["success_diagnostic", "success_test", "overlap_test", "success_test_uniform", "overlap_test_uniform",
                   "success_test_scored", "gap_allocation_spearman", "allocation_gain_spearman",
                   "targeted_improvement_rate", "success_gain_per_1k"]
DATA_COLUMNS = [c for c in COLUMNS if c not in KEY_COLUMNS and c not in LEARNER_COLUMNS]


def _rate(xs: list[bool]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _run_info(store: Store, run_id: str) -> dict:
    runs = store.read_records("runs", run_id=run_id)
    if not runs:
        raise ValueError(f"run {run_id!r} has no run record")
    r = runs[0]
    return {"run_id": run_id, "domain": r.domain, "arm": r.arm, "seed": r.seed}


def compare(store: Store, run_ids: list[str], envs: Envs, draws: int = 200) -> dict:
    """``envs``: the environment of each domain the runs name (``evosyn.tasks.reports.data.report_domains``),
    resolved once by the command."""
    infos = [_run_info(store, rid) for rid in run_ids]
    domains = sorted({i["domain"] for i in infos})
    unions = {d: pattern_union(store, [i["run_id"] for i in infos if i["domain"] == d]) for d in domains}
    finals = {i["run_id"]: verified_samples(store, i["run_id"]) for i in infos}
    matched_n = {d: min(len(finals[i["run_id"]]) for i in infos if i["domain"] == d) for d in domains}
    rows = []
    for info in sorted(infos, key=lambda i: (i["domain"], i["arm"], i["seed"], i["run_id"])):
        rid, domain = info["run_id"], info["domain"]
        pack = envs[domain].pack
        evals = store.read_records("evaluations", run_id=rid)
        rounds = sorted({e.round for e in evals if e.round > 0})
        for r in rounds:
            samples = verified_samples(store, rid, r)
            row = {**info, "round": r, "verified": len(samples),
                   "success_diagnostic": _rate([e.success for e in evals if e.round == r and e.task_set == "diagnostic"]),
                   "success_test": _rate([e.success for e in evals if e.round == r and e.task_set == "test"]),
                   "success_test_uniform": _rate([e.success for e in evals
                                                  if e.round == r and e.task_set == "test_uniform"]),
                   **intrinsic(samples, pack, unions[domain]), **round_metrics(store, rid, pack, r, samples),
                   **overlap(store, envs[domain], rid, r)}
            row.update(scored_metrics(row))  # the uniform set's score when the domain has no official-matched set
            row["final"] = r == rounds[-1]
            row["distinct_size_matched"] = (M.size_matched_distinct([s["sequence"] for s in samples],
                                                                    matched_n[domain], draws=draws)
                                            if row["final"] else float("nan"))
            rows.append({c: float("nan") for c in COLUMNS} | row)  # undefined metrics (round 1) are NaN
    means = []
    for domain in domains:
        for arm in sorted({i["arm"] for i in infos if i["domain"] == domain}):
            last = [r for r in rows if r["final"] and r["domain"] == domain and r["arm"] == arm]
            mean = {"domain": domain, "arm": arm, "runs": len(last)}
            for c in MEAN_COLUMNS:
                vals = [r[c] for r in last if not (isinstance(r[c], float) and math.isnan(r[c]))]
                mean[c] = sum(vals) / len(vals) if vals else float("nan")
            means.append(mean)
    # verdicts written before tool_use_pattern was observed lack the key: their runs must be rerun
    stale = sorted(rid for rid, xs in finals.items() if any("tool_use_pattern" not in x["observed"] for x in xs))
    uniform_only = sorted({r["domain"] for r in rows if r["test_set_scored"] == "uniform"})
    warnings = [w for r in rows if r["final"] for w in overlap_warnings(r, f"{r['run_id']}: ")]
    return {"runs": run_ids, "stale_runs": stale, "uniform_scored": uniform_only, "warnings": warnings, "pattern_union": {d: sorted(u) for d, u in unions.items()},
            "size_matched_n": matched_n, "rows": rows, "arm_means": means,
            "legend": {r.pop("name"): r for r in legend([*COLUMNS, "runs"])}}


def _cell(v) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.0f}" if v.is_integer() and abs(v) >= 2 else f"{v:.3f}"
    return str(v)


def legend_lines(result: dict) -> list[str]:
    """One line per column: its label, what it measures, range, which direction is better."""
    def tail(m: dict) -> str:
        parts = [f"range {m['range']}"] if m["range"] != "-" else []
        parts += [f"{m['better']} is better"] if m["better"] in ("higher", "lower") else []
        return f" ({'; '.join(parts)})" if parts else ""

    return [f"{m['label']}: {m['means']}{tail(m)}" for m in result["legend"].values()]


def markdown(result: dict) -> str:
    head = ["run_id", *COLUMNS]
    lines = ["# EvoSyn comparison", "",
             "Intrinsic metrics over verified data, observed factors, fixed reference sets; trajectory "
             "diversity against the union of patterns of all compared runs "
             + ", ".join(f"({d}: {len(u)} patterns)" for d, u in result["pattern_union"].items())
             + "; size-matched distinct sequences at N = "
             + ", ".join(f"{d}: {n}" for d, n in result["size_matched_n"].items()) + ".", "",
             "| " + " | ".join(label(c) for c in head) + " |", "|" + "---|" * len(head)]
    if result["stale_runs"]:
        lines.insert(3, f"Warning: runs stored before observed tool_use_pattern existed: {result['stale_runs']}.")
    for domain in result.get("uniform_scored", []):
        lines.insert(3, f"{domain}: no official tasks, no official-matched test set: its test score is the uniform "
                        "set's (test (uniform)).")
    for w in result.get("warnings", []):
        lines.insert(3, w)
    lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in head) + " |" for r in result["rows"]]
    mhead = ["domain", "arm", "runs", *MEAN_COLUMNS]
    lines += ["", "## Final round, mean over seeds", "", "| " + " | ".join(label(c) for c in mhead) + " |",
              "|" + "---|" * len(mhead)]
    lines += ["| " + " | ".join(_cell(m[c]) for c in mhead) + " |" for m in result["arm_means"]]
    lines += ["", "## Legend", ""] + [f"- {line}" for line in legend_lines(result)]
    return "\n".join(lines) + "\n"


def no_nan(obj):
    """JSON has no NaN: undefined metrics (a Spearman of one bucket, ...) become null."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: no_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [no_nan(v) for v in obj]
    return obj


def write_compare(result: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    clean = no_nan(result)
    atomic.write_json(out_dir / "compare.json", clean, indent=2)
    atomic.write_text(out_dir / "compare.md", markdown(result))
    return out_dir / "compare.json", out_dir / "compare.md"
