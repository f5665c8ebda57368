"""`evosyn report`: one self-contained HTML page and a Markdown summary of a run (and the runs beside it).

The data comes from tasks/reports/data.py, the rendering from tasks/reports/html.py; every metric
shown is named as in tasks/reports/legend.py, and the page ends with that legend.
"""
from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

from evosyn.storage import atomic
from evosyn.storage.store import Store
from evosyn.tasks.reports import data as D
from evosyn.tasks.reports import html as H
from evosyn.tasks.reports.legend import legend, label
from evosyn.tasks.metrics import pattern_union
from evosyn.tasks.overlap import SET_LABEL, overlap_warnings


def llm_cost_rows(store: Store, run_id: str) -> list[dict]:
    """LLM usage and cost per verified sample, by round and role (``llm_calls`` joined with ``verdicts``)."""
    calls = store.read_records("llm_calls", run_id=run_id)
    if not calls:
        return []
    verified: dict[int, set[str]] = defaultdict(set)
    for v in store.read_records("verdicts", run_id=run_id):
        if v.passed:
            verified[v.round].add(v.task_id)
    by: dict[tuple[int, str], list] = defaultdict(list)
    for c in calls:
        by[(c.round, c.role)].append(c)
    rows = []
    for (r, role), cs in sorted(by.items()):
        cost, n = sum(c.cost_usd for c in cs), len(verified.get(r, ()))
        rows.append({"round": r, "role": role, "calls": len(cs), "cache_hits": sum(c.cache_hit for c in cs),
                     "failed": sum(c.status not in ("ok", "fallback") for c in cs),
                     "fallbacks": sum(c.status == "fallback" for c in cs), "input_tokens": sum(c.input_tokens for c in cs),
                     "output_tokens": sum(c.output_tokens for c in cs),
                     "latency_s": sum(c.latency_s for c in cs), "cost_usd": cost, "verified": n,
                     "cost_per_verified_usd": cost / n if n else "n/a"})
    return rows


COLS = ["round", "verified", "verified_new", "success_diagnostic", "success_test", "overlap_test",
        "success_test_uniform", "overlap_test_uniform", "test_set_scored", "success_test_ci", "factor_coverage", "factor_balance", "interaction_coverage", "trajectory_diversity", "distinct_tool_sequences",
        "share_num_write_3plus"]
UNION_COLS = [*COLS[:COLS.index("trajectory_diversity") + 1], "trajectory_diversity_union",
              *COLS[COLS.index("trajectory_diversity") + 1:]]
ARM_COLS = ["domain", "arm", "round", "task_set", "runs", "n", "success", "ci_low", "ci_high"]
TRACE = ["transition", "space", "evidence", "decision", "reviews", "designer_focus", "change"]
VERSION_COLS = ["round", "version_in", "version_out", "factors", "diff"]
LLM_COLS = ["round", "role", "calls", "cache_hits", "failed", "fallbacks", "input_tokens", "output_tokens", "latency_s", "cost_usd",
            "verified", "cost_per_verified_usd"]
TRACE_NOTE = ("<p>The space each round used (in) and left for the next (out), then one row per transition between "
              "rounds that ran (Tables 13/15): <b>evidence</b> is the round's probe with the most failure "
              "information the space does not explain (I(Y;d|O), nats); <b>decision</b> the Reflector's; "
              "<b>reviews</b> its review of each experimental factor (promote, keep experimental, deprecate) with "
              "the learner's success on the values the factor was added for, then and now; "
              "<b>designer_focus</b> the values the next round's directions asked for most (blueprints); "
              "<b>change</b> this round's value -&gt; the next round's. An update after the last round is listed "
              "as proposed for a round that did not run.</p>")
LEGEND_EXTRA = ["slice_success", "allocation", "probe_failure_rate", "cmi_given_space"]
DEDUP_COLS = ["checked_set", "checked", "flagged", "duplicate", "official", "official_test", "test_set"]
DEDUP_NOTE = ("<p>Verified tasks of each round, and the tasks of the test sets the run is scored on, checked for near "
              "copies (MinHash over the user's instruction, and the gold actions): of an earlier task of the run "
              "(duplicate), of an official task of the domain (official; official_test when it is in tau2's test "
              "split) and of a test-set task (test_set). The rows are in the <code>dedup</code> table.</p>")


def _md(rows: list[dict], cols: list[str]) -> str:
    cell = lambda v: H.fmt(v).replace("|", "\\|")  # noqa: E731
    return "\n".join(["| " + " | ".join(label(c) for c in cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows])


def _pivot(rows: list[dict], key: str, value: str) -> list[dict]:
    """(…, key, round, value) rows as one row per key with a column per round."""
    out: dict[tuple, dict] = {}
    for r in rows:
        k = tuple(r[c] for c in key.split(","))
        out.setdefault(k, dict(zip(key.split(","), k)))[f"round {r['round']}"] = r[value]
    return list(out.values())


def _round_cols(rows: list[dict]) -> list[str]:
    return [f"round {r}" for r in sorted({r["round"] for r in rows})]


def _samples_html(samples: list[dict]) -> str:
    if not samples:
        return "<p>No verified sample in this run.</p>"
    seen: set[str] = set()
    parts = []
    for s in samples:  # the first sample of each slice unfolded, the others one click away
        parts.append(H.chat(s, D.chat_turns(s["messages"]), shown=s["value"] not in seen))
        seen.add(s["value"])
    return ("<p>The latest verified samples of each task family, as the learner is trained on them "
            "(tool results shortened).</p>" + "".join(parts))


def fallback_warnings(store: Store, run_id: str) -> list[str]:
    """One warning per round and role that went on without a usable LLM reply (``on_invalid: fallback``)."""
    rows = store.read_fields("llm_calls", ["round", "role", "status"], run_id=run_id)
    seen = sorted({(r["round"], r["role"]) for r in rows if r["status"] == "fallback"})
    return [f"warning: round {r}: {role} fell back (its LLM replies stayed invalid; on_invalid: fallback)"
            for r, role in seen]


PASS_NOTE = ("<p>Each verified task evaluated <code>served.trials</code> times by the served learner: tasks per "
             "bin of their pass rate, per value of each factor of their verified solution. Tasks inside (0, 1) "
             "are where a policy-gradient trainer learns (<code>evosyn export --pass-rate LO,HI</code>).</p>")


def write_report(store: Store, run_id: str, compare: list[str], out_dir: Path, envs: D.Envs) -> tuple[Path, Path]:
    """``envs``: the environment of each domain ``D.report_domains`` names for ``[run_id, *compare]``, resolved
    once by the command."""
    ids = [run_id, *[c for c in dict.fromkeys(compare) if c != run_id]]
    union = pattern_union(store, ids) if len(ids) > 1 else None  # one P_union for every run shown (App. B.1)
    cols = UNION_COLS if union is not None else COLS
    run = store.read_records("runs", run_id=run_id)
    ran = D.rounds_ran(store, run_id)
    meta = (f"domain {run[0].domain}, arm {run[0].arm}, seed {run[0].seed}, backend {run[0].backend}; "
            f"{len(ran)} of {run[0].rounds} rounds ran; status {run[0].status}; store {store.root}"
            if run else f"store {store.root}")
    rows = {rid: D.run_rows(store, rid, envs, union) for rid in ids}
    scored = D.scored_task_set(store, run_id)
    if scored != "test":  # no official-matched set: the uniform one is the test set, said so
        meta += "; no official-matched test set (no official tasks): test scores are the uniform set's, test (uniform)"
    # no silent fallback, no silent copies of test tasks in training: said at the top of both pages
    warnings = fallback_warnings(store, run_id) + (overlap_warnings(rows[run_id][-1]) if rows[run_id] else [])
    if warnings:
        meta += "; " + "; ".join(warnings)
    sections, md = [], [f"# EvoSyn report: {run_id}", meta]
    for rid in ids:
        sections.append((f"run-{len(sections)}", f"Rounds of {rid}", H.table(rows[rid], cols)))
        md += [f"## Rounds of {rid}", _md(rows[rid], cols)]
    arms = D.arm_success(store, ids)
    per_arm = len({(a["domain"], a["arm"]) for a in arms}) > 1 or len(ids) > 1
    sections.append(("success", "Success over rounds", H.figure(
        H.success_plot(arms), "success over rounds",
        "Learner success on the fixed test set and on the diagnostic set after each round"
        + (", one line per arm (its runs pooled)" if per_arm else "")
        + "; the band is the 95% Wilson score interval over the evaluated tasks.")
        + (H.table(arms, ARM_COLS) if per_arm else "")))
    if per_arm:
        md += ["## Success over rounds per arm (95% Wilson interval over test tasks)", _md(arms, ARM_COLS)]
    slices = D.slice_success(store, run_id, scored)
    png = H.slice_plot(slices, scored)
    sections.append(("slices", "Per-slice test success", H.figure(
        png, "per-slice success over rounds",
        f"Test success of {run_id} ({SET_LABEL[scored]} set) per value of each factor, observed on the test task's "
        "gold solution; n is the number of test tasks in the slice.") if png else "<p>No test set was evaluated.</p>"))
    md += ["## Per-slice test success", _md(_pivot(slices, "factor,value", "success"),
                                            ["factor", "value", *_round_cols(slices)])]
    alloc = D.allocation(store, run_id)
    png = H.allocation_plot(alloc)
    sections.append(("allocation", "Allocation over factor values", H.figure(
        png, "allocation over factor values",
        "Blueprints the Designer's directions asked for in each round, stacked by factor value (a direction "
        "naming several values is split evenly between them; (any) = the direction leaves the factor free).")
        if png else "<p>No Designer direction was stored.</p>"))
    md += ["## Allocation (blueprints per factor value)", _md(_pivot(alloc, "factor,value", "blueprints"),
                                                               ["factor", "value", *_round_cols(alloc)])]
    probes = D.probe_failures(store, run_id)
    png = H.probe_plot(probes)
    sections.append(("probes", "Failure rate per probe bucket", H.figure(
        png, "failure rate per probe bucket",
        "Diagnostic failure rate of the learner per bucket of each probe (a property of the task's gold "
        "solution), one bar per round; empty buckets are left out.") if png else "<p>No probe was stored.</p>"))
    md += ["## Failure rate per probe bucket", _md(_pivot(probes, "probe,bucket", "failure_rate"),
                                                   ["probe", "bucket", *_round_cols(probes)])]
    rates = D.pass_rate_slices(store, run_id)
    if rates:  # a served learner with trials: pass@k per task, by slice
        rate_cols = ["factor", "value", "tasks", "mean pass rate", *D.PASS_BINS]
        sections.append(("pass-rates", "Pass rates per task (pass@k trials)", PASS_NOTE + H.table(rates, rate_cols)))
        md += ["## Pass rates per task (pass@k trials)", _md(rates, rate_cols)]
    tr, versions = D.trace(store, run_id, envs), D.space_versions(store, run_id)
    trace_html = (TRACE_NOTE + H.table(versions, VERSION_COLS) + (H.table(tr, TRACE) if tr else
                                                   "<p>No transition: a single round ran and left the space as "
                                                   "it was.</p>"))
    sections.append(("trace", "Evolution trace", trace_html))
    md += ["## Evolution trace", _md(versions, VERSION_COLS), _md(tr, TRACE) if tr else "No transition."]
    if len(ids) > 1:
        from evosyn.tasks.reports.compare import COLUMNS, markdown
        from evosyn.tasks.reports.compare import compare as compare_runs

        result = compare_runs(store, ids, envs)
        sections.append(("comparison", "Comparison (shared pattern union)", H.table(result["rows"],
                                                                                   ["run_id", *COLUMNS])
                         + "<h3>Final round, mean over seeds</h3>"
                         + H.table(result["arm_means"], list(result["arm_means"][0]))))
        md.append(markdown(result).replace("# EvoSyn comparison", "## Comparison"))
        cols = [*cols, *COLUMNS]
    dedup = D.dedup_rows(store, run_id, envs)
    if dedup:
        sections.append(("dedup", "Near copies and contamination", DEDUP_NOTE + H.table(dedup, DEDUP_COLS)))
        md += ["## Near copies and contamination", _md(dedup, DEDUP_COLS)]
        cols = [*cols, *DEDUP_COLS[1:]]
    cost = llm_cost_rows(store, run_id)
    if cost:
        sections.append(("cost", "LLM cost per verified sample by role", H.table(cost, LLM_COLS)))
        md += ["## LLM cost per verified sample by role", _md(cost, LLM_COLS)]
    sections.append(("samples", "Sample trajectories", _samples_html(D.sample_trajectories(store, run_id, envs, per_slice=2))))
    names = legend([*cols, *(ARM_COLS if per_arm else []), *LEGEND_EXTRA])
    sections.append(("legend", "Legend", H.legend_table(names)))
    md += ["## Legend", "\n".join(f"- **{r['label']}** (`{r['name']}`): {r['means']}; range {r['range']}; "
                                   f"better: {r['better']}" for r in names)]
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out_dir / "report.html", H.page(f"EvoSyn report: {run_id}", html.escape(meta), sections))
    atomic.write_text(out_dir / "summary.md", "\n\n".join(md) + "\n")
    return out_dir / "report.html", out_dir / "summary.md"
