"""`evosyn report`: an HTML page (plots, evolution trace like Tables 13/15) and a Markdown summary."""
from __future__ import annotations

import base64
import html
import io
from collections import Counter, defaultdict
from pathlib import Path

from envs.packs import default_domain
from storage import atomic
from storage.store import Store
from pipeline.metrics import intrinsic, pattern_union, verified_samples


def _rate(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def run_rows(store: Store, run_id: str, union: set[str] | None = None) -> list[dict]:
    evals = store.read_records("evaluations", run_id=run_id)
    runs = store.read_records("runs", run_id=run_id)
    domain = runs[0].domain if runs else default_domain()
    rounds = sorted({e.round for e in evals})
    rows = []
    for r in rounds:
        samples = verified_samples(store, run_id, r)
        row = {"round": r, **intrinsic(samples, domain, union)}
        row["success_test"] = _rate(e.success for e in evals if e.round == r and e.task_set == "test")
        row["success_diagnostic"] = _rate(e.success for e in evals if e.round == r and e.task_set == "diagnostic")
        by = defaultdict(list)
        for e in evals:
            if e.round == r and e.task_set == "test":
                for v in e.observed.get("num_write", []):
                    by[v].append(int(e.success))
        row["test_by_num_write"] = {k: _rate(v) for k, v in sorted(by.items())}
        this = [s for s in samples if s["round"] == r]
        row["verified"] = len(this)
        row["share_num_write_3plus"] = _rate(s["observed"].get("num_write", ["0"])[0] in ("3-4", "5+") for s in this)
        rows.append(row)
    return rows


def trace(store: Store, run_id: str) -> list[dict]:
    """One row per transition r -> r+1: evidence, Reflector decision, Designer focus, observed change."""
    probes = store.read_records("probes", run_id=run_id)
    refl = {x.round: x for x in store.read_records("reflections", run_id=run_id)}
    dirs = store.read_records("directions", run_id=run_id)
    rows_by_round = {row["round"]: row for row in run_rows(store, run_id)}
    out = []
    for r in sorted(rows_by_round):
        top = max((p for p in probes if p.round == r), key=lambda p: p.cmi_given_space, default=None)
        evidence = (f"{top.probe}: I(Y;d|O)={top.cmi_given_space:.3f}, residual {top.residual_cmi:.3f}"
                    if top else "")
        nxt = [d for d in dirs if d.round == r + 1]
        focus = Counter()
        for d in nxt:
            for k, vs in {**d.allowed_values, **d.preferred_values}.items():
                focus[f"{k}={'/'.join(vs)}"] += d.n_blueprints
        change = ""
        if r + 1 in rows_by_round:
            a, b = rows_by_round[r]["share_num_write_3plus"], rows_by_round[r + 1]["share_num_write_3plus"]
            change = f"3+ write share {a:.2f} -> {b:.2f}"
        out.append({"transition": f"{r} -> {r + 1}", "evidence": evidence,
                    "decision": refl[r].summary if r in refl else "(no Reflector in this arm)",
                    "designer_focus": ", ".join(f"{k} ({n})" for k, n in focus.most_common(3)), "change": change})
    return out


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def plots(store: Store, run_ids: list[str]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for rid in run_ids:
        for row in run_rows(store, rid)[-1:]:
            ks = list(row["test_by_num_write"])
            ax.plot(ks, [row["test_by_num_write"][k] for k in ks], marker="o", label=rid)
    ax.set_xlabel("num_write of the gold solution"), ax.set_ylabel("test success (final round)"), ax.legend(fontsize=7)
    out["per-slice success"] = _png(fig)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    dirs = store.read_records("directions", run_id=run_ids[0])
    kinds = sorted({d.objective_type for d in dirs})
    rounds = sorted({d.round for d in dirs})
    bottom = [0] * len(rounds)
    for k in kinds:
        vals = [sum(d.n_blueprints for d in dirs if d.round == r and d.objective_type == k) for r in rounds]
        ax.bar([str(r) for r in rounds], vals, bottom=bottom, label=k)
        bottom = [a + b for a, b in zip(bottom, vals)]
    ax.set_xlabel("round"), ax.set_ylabel("blueprints"), ax.legend(fontsize=7)
    out["allocation shift"] = _png(fig)
    plt.close(fig)
    probes = [p for p in store.read_records("probes", run_id=run_ids[0]) if p.probe == "num_write"]
    if probes:
        first = min(probes, key=lambda p: p.round)
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.bar([b.bucket for b in first.buckets], [b.failure_rate or 0 for b in first.buckets])
        ax.set_xlabel("num_write bucket"), ax.set_ylabel(f"failure rate (round {first.round})")
        out["failure rate by probe bucket"] = _png(fig)
        plt.close(fig)
    return out


def _table(rows: list[dict], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c, '')))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(v) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _md(rows: list[dict], cols: list[str]) -> str:
    cell = lambda v: _fmt(v).replace("|", "\\|")  # noqa: E731
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows])


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
                     "failed": sum(c.status != "ok" for c in cs), "input_tokens": sum(c.input_tokens for c in cs),
                     "output_tokens": sum(c.output_tokens for c in cs),
                     "latency_s": sum(c.latency_s for c in cs), "cost_usd": cost, "verified": n,
                     "cost_per_verified_usd": cost / n if n else "n/a"})
    return rows


COLS = ["round", "verified", "success_diagnostic", "success_test", "factor_coverage", "factor_balance",
        "interaction_coverage", "trajectory_diversity", "distinct_tool_sequences", "share_num_write_3plus"]
TRACE = ["transition", "evidence", "decision", "designer_focus", "change"]
LLM_COLS = ["round", "role", "calls", "cache_hits", "failed", "input_tokens", "output_tokens", "latency_s", "cost_usd",
            "verified", "cost_per_verified_usd"]


def write_report(store: Store, run_id: str, compare: list[str], out_dir: Path) -> tuple[Path, Path]:
    ids = [run_id, *compare]
    union = pattern_union(store, ids)  # one P_union for every run shown (App. B.1)
    sections, md = [], [f"# EvoSyn report: {run_id}"]
    if compare:
        from pipeline.compare import COLUMNS, markdown
        from pipeline.compare import compare as compare_runs

        result = compare_runs(store, ids)
        sections.append("<h2>Comparison (shared pattern union)</h2>" + _table(result["rows"], ["run_id", *COLUMNS])
                        + "<h3>Final round, mean over seeds</h3>"
                        + _table(result["arm_means"], list(result["arm_means"][0])))
        md.append(markdown(result).replace("# EvoSyn comparison", "## Comparison"))
    for rid in ids:
        rows = run_rows(store, rid, union)
        sections.append(f"<h2>{html.escape(rid)}</h2>" + _table(rows, COLS))
        md += [f"## {rid}", _md(rows, COLS)]
    cost = llm_cost_rows(store, run_id)
    if cost:
        sections.append("<h2>LLM cost per verified sample by role</h2>" + _table(cost, LLM_COLS))
        md += ["## LLM cost per verified sample by role", _md(cost, LLM_COLS)]
    tr = trace(store, run_id)
    sections.append("<h2>Evolution trace</h2>" + _table(tr, TRACE))
    md += ["## Evolution trace", _md(tr, TRACE)]
    for title, png in plots(store, ids).items():
        sections.append(f"<h3>{html.escape(title)}</h3><img src='data:image/png;base64,{png}'/>")
    out_dir.mkdir(parents=True, exist_ok=True)
    page = ("<html><head><meta charset='utf-8'><title>EvoSyn report</title><style>body{font-family:sans-serif}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}</style>"
            f"</head><body><h1>EvoSyn report: {html.escape(run_id)}</h1>{''.join(sections)}</body></html>")
    atomic.write_text(out_dir / "report.html", page)
    atomic.write_text(out_dir / "summary.md", "\n\n".join(md) + "\n")
    return out_dir / "report.html", out_dir / "summary.md"
