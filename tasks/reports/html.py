"""Rendering of `evosyn report`: matplotlib plots as base64 PNG, tables, chat transcripts, one HTML page.

The page is self-contained: inline CSS, images as data URIs, no script and no external resource, so it
opens from a CI artifact or an e-mail attachment as it does from the store.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import defaultdict

from evosyn.tasks.reports.legend import METRICS, label
from evosyn.tasks.overlap import SET_LABEL
from evosyn.tasks.reports.data import ANY, PROBE_ORDER, SLICE_FACTORS

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;
color:#1f2328;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #d0d7de;padding-bottom:.3em}
h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
h3{font-size:1.05em}
nav a{margin-right:1em}
.meta{color:#57606a}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}
th{background:#f6f8fa;text-align:left;cursor:help}
td,th{border:1px solid #d0d7de;padding:3px 7px;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.short{white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%}
figure{margin:1em 0}
figcaption{color:#57606a;font-size:13px;max-width:900px}
img.plot{max-width:100%;border:1px solid #d0d7de}
.chat{border:1px solid #d0d7de;border-radius:6px;padding:.5em;margin:.5em 0 1.5em;max-width:950px}
.msg{margin:.35em 0;padding:.4em .7em;border-radius:6px;white-space:pre-wrap;font-size:13px}
.msg .who{font-weight:600;font-size:12px;color:#57606a;display:block}
.user{background:#ddf4ff;margin-right:15%}
.assistant{background:#f6f8fa;margin-left:15%}
.tool{background:#fff8c5;margin-left:15%;font-family:ui-monospace,monospace;font-size:12px}
.tool.error{background:#ffebe9}
.call{font-family:ui-monospace,monospace;font-size:12px;background:#eaeef2;border-radius:4px;padding:2px 5px;
margin-top:3px;display:block}
.checks{font-size:12px;color:#57606a}
summary{cursor:pointer;color:#57606a;font-size:13px}
.better-higher{color:#1a7f37}.better-lower{color:#cf222e}
"""
TOOL_RESULT_CHARS = 500


def fmt(v) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.0f}" if v.is_integer() and abs(v) >= 2 else f"{v:.3f}"
    return "-" if v is None else str(v)


def table(rows: list[dict], cols: list[str]) -> str:
    head = "".join(f"<th title='{html.escape(METRICS[c].means, quote=True)}'>{html.escape(label(c))}</th>"
                   if c in METRICS else f"<th>{html.escape(c)}</th>" for c in cols)
    def cell(v) -> str:
        text = fmt(v)
        cls = "num" if isinstance(v, (int, float)) else "short" if len(text) <= 16 else ""
        return f"<td class='{cls}'>{html.escape(text)}</td>" if cls else f"<td>{html.escape(text)}</td>"

    body = "".join("<tr>" + "".join(cell(r.get(c, "")) for c in cols) + "</tr>" for r in rows)
    return f"<div class='scroll'><table><tr>{head}</tr>{body}</table></div>"


def legend_table(rows: list[dict]) -> str:
    body = "".join(f"<tr><td><code>{html.escape(r['name'])}</code></td><td>{html.escape(r['label'])}</td>"
                   f"<td>{html.escape(r['means'])}</td><td>{html.escape(r['range'])}</td>"
                   f"<td class='better-{html.escape(r['better'])}'>{html.escape(r['better'])}</td></tr>" for r in rows)
    return ("<table class='legend'><tr><th>name</th><th>shown as</th><th>what it measures</th><th>range</th>"
            f"<th>better</th></tr>{body}</table>")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _plt().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def figure(png: str, alt: str, caption: str) -> str:
    return (f"<figure><img class='plot' alt='{html.escape(alt, quote=True)}' src='data:image/png;base64,{png}'/>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _outside(ax) -> None:
    """The legend right of the axes, so it never hides a line or a bar."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _grid(plt, n: int, width: float = 6.2, height: float = 3.0):
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    flat = [a for row in axes for a in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def success_plot(arm_rows: list[dict]) -> str:
    """Success on both test sets and the diagnostic set over rounds, one line per (domain, arm), 95% Wilson band."""
    plt = _plt()
    # only the sets evaluated: a domain with no official tasks has no official-matched set, and no empty chart
    sets = [s for s in ("test", "test_uniform", "diagnostic") if any(r["task_set"] == s for r in arm_rows)] \
        or ["test_uniform"]
    fig, axes = _grid(plt, len(sets))
    for ax, task_set in zip(axes, sets):
        by = defaultdict(list)
        for r in arm_rows:
            if r["task_set"] == task_set:
                by[(r["domain"], r["arm"])].append(r)
        for (domain, arm), rs in sorted(by.items()):
            xs = [r["round"] for r in rs]
            line, = ax.plot(xs, [r["success"] for r in rs], marker="o", label=f"{domain} / {arm}")
            ax.fill_between(xs, [r["ci_low"] for r in rs], [r["ci_high"] for r in rs], alpha=0.2,
                            color=line.get_color())
        ax.set_title(f"{SET_LABEL.get(task_set, task_set)} success (95% Wilson CI)", fontsize=10)
        ax.set_xlabel("round"), ax.set_ylabel("success rate"), ax.set_ylim(0, 1)
        ax.xaxis.get_major_locator().set_params(integer=True)
        _outside(ax)
    return _png(fig)


def slice_plot(rows: list[dict], task_set: str = "test") -> str | None:
    """Success per value of each slice factor over rounds, on ``task_set`` (the run's scored set); a factor no test
    task showed is left out, and with none at all there is no plot."""
    factors = [f for f in SLICE_FACTORS if any(r["factor"] == f for r in rows)]
    if not factors:
        return None
    plt = _plt()
    fig, axes = _grid(plt, len(factors))
    for ax, f in zip(axes, factors):
        by = defaultdict(list)
        for r in rows:
            if r["factor"] == f:
                by[r["value"]].append(r)
        for v, rs in sorted(by.items()):
            ax.plot([r["round"] for r in rs], [r["success"] for r in rs], marker="o", label=f"{v} (n={rs[-1]['n']})")
        _outside(ax)
        ax.set_title(f"{SET_LABEL.get(task_set, task_set)} success by {f}", fontsize=10)
        ax.set_xlabel("round"), ax.set_ylabel("success rate"), ax.set_ylim(-0.02, 1.02)
        ax.xaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def allocation_plot(rows: list[dict]) -> str | None:
    factors = sorted({r["factor"] for r in rows})
    if not factors:
        return None
    plt = _plt()
    fig, axes = _grid(plt, len(factors))
    for ax, f in zip(axes, factors):
        mine = [r for r in rows if r["factor"] == f]
        rounds = sorted({r["round"] for r in mine})
        bottom = [0.0] * len(rounds)
        values = sorted({r["value"] for r in mine}, key=lambda v: (v != ANY, v))  # (any) at the bottom, grey
        for v in values:
            vals = [sum(r["blueprints"] for r in mine if r["round"] == rd and r["value"] == v) for rd in rounds]
            ax.bar([str(rd) for rd in rounds], vals, bottom=bottom, label=v, **({"color": "#c8ccd0"} if v == ANY else {}))
            bottom = [a + b for a, b in zip(bottom, vals)]
        ax.set_title(f"blueprints by {f}", fontsize=10)
        ax.set_xlabel("round"), ax.set_ylabel("blueprints")
        _outside(ax)
    return _png(fig)


def probe_plot(rows: list[dict]) -> str | None:
    probes = [p for p in PROBE_ORDER if any(r["probe"] == p for r in rows)]
    if not probes:
        return None
    plt = _plt()
    fig, axes = _grid(plt, len(probes))
    for ax, p in zip(axes, probes):
        mine = [r for r in rows if r["probe"] == p]
        buckets = [b for _, b in sorted({(r["order"], r["bucket"]) for r in mine})]
        rounds = sorted({r["round"] for r in mine})
        width = 0.8 / len(rounds)
        for i, rd in enumerate(rounds):
            rate = {r["bucket"]: r["failure_rate"] for r in mine if r["round"] == rd}
            ax.bar([j + i * width for j in range(len(buckets))], [rate.get(b, 0.0) for b in buckets], width,
                   label=f"round {rd}")
        ax.set_xticks([j + width * (len(rounds) - 1) / 2 for j in range(len(buckets))], buckets)
        ax.set_title(f"diagnostic failure rate by {p}", fontsize=10)
        ax.set_ylabel("failure rate"), ax.set_ylim(0, 1)
        _outside(ax)
    return _png(fig)


def chat(sample: dict, turns: list[dict], shown: bool = True) -> str:
    """A verified sample as a chat: user, assistant (each tool call with its arguments), tool results;
    ``shown`` = unfolded (otherwise one click away)."""
    parts = []
    for t in turns:
        who = "user" if t["role"] == "user" else "tool result" if t["role"] == "tool" else "assistant"
        if t["role"] == "tool" and t["requestor"] == "user":
            who = "tool result (user's device)"
        text = t["content"]
        if t["role"] == "tool" and len(text) > TOOL_RESULT_CHARS:
            text = text[:TOOL_RESULT_CHARS] + f" ... ({len(t['content'])} characters)"
        calls = "".join(f"<span class='call'>&rarr; {html.escape(name)}("
                        f"{html.escape(json.dumps(args, ensure_ascii=False))})</span>" for name, args in t["calls"])
        cls = t["role"] + (" error" if t["error"] else "")
        parts.append(f"<div class='msg {cls}'><span class='who'>{who}</span>{html.escape(text)}{calls}</div>")
    checks = ", ".join(f"{n} {'ok' if ok else 'FAILED: ' + why}" for n, ok, why in sample["checks"])
    head = (f"<h3>{html.escape(sample['factor'])} = {html.escape(sample['value'])}: task "
            f"<code>{html.escape(sample['task_id'])}</code> (round {sample['round']})</h3>")
    intent = f"<p><b>user's goal:</b> {html.escape(sample['instruction'])}</p>" if sample["instruction"] else ""
    return (f"<div class='sample'>{head}{intent}<p class='checks'>verifier: {html.escape(checks)}</p>"
            f"<details{' open' if shown else ''}><summary>{len(turns)} messages</summary>"
            f"<div class='chat'>{''.join(parts)}</div></details></div>")


def page(title: str, meta: str, sections: list[tuple[str, str, str]]) -> str:
    """sections: (anchor, heading, body html)."""
    nav = "".join(f"<a href='#{a}'>{html.escape(h)}</a>" for a, h, _ in sections)
    body = "".join(f"<section id='{a}'><h2>{html.escape(h)}</h2>{b}</section>" for a, h, b in sections)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1><p class='meta'>{meta}</p>"
            f"<nav>{nav}</nav>{body}</body></html>")
