"""benchmarks/RESULTS.md from the recorded JSON (benchmarks/results/<benchmark>.json), never by hand.

One section per benchmark: what it measures, then per recorded JSON the command, the machine and its load,
the seeds, the spread and the figures. A benchmark with no JSON says so ("not yet measured on record") and
names the command that records it. The text depends on the JSON alone (no clock, no machine lookup), so the
same JSON always gives the same bytes.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
RESULTS_MD = HERE / "RESULTS.md"

Figures = Callable[[dict[str, Any]], list[str]]


@dataclass(frozen=True)
class Section:
    key: str  # the JSON's benchmark name up to the first '-': synth-<domain> -> synth
    title: str
    measures: str
    record: str  # the command that records it (shown while nothing is on record)
    spread: str  # how the benchmark gives its spread
    figures: Figures
    seeds: str = "none (the benchmark takes no seed)"  # where the JSON records none


def cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows] + [""]


def num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ci(row: dict[str, Any], signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(row['mean'])} [{f.format(row['lo'])}, {f.format(row['hi'])}]"


# ---------------------------------------------------------------- one function per benchmark's figures
def synth(p: dict) -> list[str]:
    stages, cpu, kept = p["stages"], p["stage_cpu"], max(p["verified"], 1)
    head = (f"{p['verified']} verified of {p['blueprints']} blueprints in {p['seconds']:.2f} s: "
            f"**{p['verified_per_second']:.1f} verified tasks/s**, {p['cpu_ms_per_verified']:.2f} ms CPU per verified "
            f"task with the domain's load ({p['cpu_ms_per_verified_without_domain_load']:.2f} ms without it).")
    return [head, "",
            *table(["stage", "wall s", "CPU s", "CPU ms per verified task"],
                   [[k, num(v), num(cpu.get(k, 0.0)), num(1000 * cpu.get(k, 0.0) / kept)] for k, v in stages.items()]
                   + [["domain load (once per process)", num(p["domain_load_seconds"]),
                       num(p["domain_load_cpu_seconds"]), ""]])]


def testsets(p: dict) -> list[str]:
    rows = []
    for kind, s in p["sets"].items():
        r = s["report"]
        tv = (f"{r['tv']:.3f} ({r['tv_realizable']:.3f} realizable)" if kind != "uniform"
              else f"num_write {num(r['tv_from_uniform'].get('num_write'), 3)}")
        rows.append([kind, r.get("run_id", "-"), s["tasks"], r.get("attempts", "-"), num(s["cpu_seconds"], 1),
                     num(s["seconds"], 1), tv])
    return table(["set", "run id (its seed after -s)", "tasks", "blueprints tried", "CPU s", "wall s", "TV distance"],
                 rows)


def verify(p: dict) -> list[str]:
    from evosyn.benchmarks.verify import headers, headline, rows

    return [headline(p), "", *table(headers(p), rows(p))]


def learner(p: dict) -> list[str]:
    n = p["test_tasks"]

    def se(s: float) -> str:  # the binomial standard error of a success rate over n test tasks
        return f"{s:.3f} ± {(s * (1 - s) / n) ** 0.5:.3f}"

    rss = any("peak_rss_mib" in r for r in p["curve"])  # recorded since the benchmark reports it
    out = table(["train size", "success ± SE", "train CPU s", "CPU ms per trained trajectory",
                 "CPU ms per evaluated task", *(["peak RSS MiB (the process, so far)"] if rss else [])],
                [[r["size"], se(r["success"]), num(r["train_cpu_seconds"], 1), num(r["train_cpu_ms_per_trajectory"], 1),
                  num(r["eval_cpu_ms_per_task"], 1), *([num(r.get("peak_rss_mib"), 0)] if rss else [])]
                 for r in p["curve"]])
    if p.get("ablation"):
        out += ["Multi-write ablation:", "", *table(
            ["training data", "size", "multi-write share", "success ± SE", "success on 3+ writes"],
            [[r["train"], r["size"], num(r["multi_write_share"]), se(r["success"]),
              f"{r['success_3plus_writes']:.3f} (n={r['tasks_3plus_writes']})"] for r in p["ablation"]])]
    return [f"Success on {n} fixed test tasks.", "", *out]


def run(p: dict) -> list[str]:
    head = (f"Timed: `{p['command']}`. Wall {p['wall_s']:.2f} s, CPU {p['cpu_s']:.2f} s, peak RSS "
            f"{p['peak_rss_mb']:.0f} MiB; start-up, exit and orchestration {p['overhead_wall_share']:.1%} of wall.")
    yields = p.get("verified_yield") or []
    if yields:  # recorded since the Planner asks the generator (older files have none)
        head += " Verified yield per round (verified tasks / budget): " + ", ".join(
            f"round {y['round']} {y['verified']}/{y['budget']} = {y['yield']:.2f}" for y in yields) + "."
    return [head, "",
            *table(["group", "part", "wall s", "CPU s", "note"],
                   [[r["group"], r["part"], num(r["wall_s"]), num(r["cpu_s"]), r["note"]] for r in p["rows"]])]


def query(p: dict) -> list[str]:
    from evosyn.benchmarks.query import rows

    spreads = [t.get("wall_ms_spread") for t in p["timings"].values()]
    head = (f"{p['rows']:,} evaluation rows, {p['runs']} runs x {p['rounds']} rounds; best of {p['repeat']}. "
            f"Targets {'met' if p['passed'] else 'not all met'}; the typed and JSON slices "
            f"{'agree' if p['slices_agree'] else 'DISAGREE'}.")
    return [head, "",
            *table(["query", "wall (best)", "CPU (best)", "target", "", "wall min / median / max"],
                   [[*r, "-" if s is None else f"{s['min']:.1f} / {s['median']:.1f} / {s['max']:.1f} ms"]
                    for r, s in zip(rows(p), spreads)])]


def llm(p: dict) -> list[str]:
    from evosyn.benchmarks.llm import HEADERS, rows, summary

    runs = p.get("runs") or [p]
    return [*table(HEADERS, [row for r in runs for row in rows(r)]), *[f"- {summary(r)}" for r in runs], ""]


def faults(p: dict) -> list[str]:
    failed = sum(not c["passed"] for c in p["checks"])
    head = (f"{'PASS' if p['passed'] else 'FAIL'}: {len(p['checks']) - failed} of {len(p['checks'])} rows pass "
            f"({p['seconds']:.0f} s).")
    return [head, "",
            *table(["area", "check", "result", "detail", "seconds"],
                   [[c["area"], c["check"], "PASS" if c["passed"] else "FAIL", c["detail"], f"{c['seconds']:.0f}"]
                    for c in p["checks"]])]


def learning(p: dict) -> list[str]:
    probes = p.get("probe_size", 0)  # a recording without the key ran with probe_size 0, the default then
    out = [f"The feedback arm's Reflector also read a probe set of {probes} blueprints per round." if probes else
           "No arm read a probe set (probe_size 0).", ""]
    out += table(["set", "tasks", "round", "arm", "mean [CI]", "per seed"],
                [[r["set"], r["n_tasks"], r["round"], r["arm"], ci(r),
                  " ".join(f"{v:.3f}" for v in r["per_seed"].values())] for r in p["success"]])
    if p.get("paired"):
        out += ["Paired differences (by seed and task):", "", *table(
            ["set", "round", "difference", "mean [CI]"],
            [[r["set"], r["round"], f"{r['a']} - {r['b']}", ci(r, signed=True)] for r in p["paired"]])]
    if p.get("adaptation"):
        out += [("Within-space adaptation (a slice's allocation gain, its share of the round's verified data minus the "
                 "previous round's, against its success gap, the previous learner's success on the set minus on the "
                 "slice): the gap-allocation Spearman and the targeted improvement rate, mean over seeds [range]:"), "",
                *table(["arm", "set", "round", "seeds", "slices", "gap-allocation Spearman",
                        "targeted improvement rate"],
                       [[a["arm"], a["set"], a["round"], a["seeds"], a["slices"], ranged(a["spearman"],
                                                                                          a.get("spearman_range")),
                         ranged(a["targeted_improvement_rate"], a.get("rate_range"))] for a in p["adaptation"]])]
    return out


def ranged(value: float | None, span: list[float] | None) -> str:
    """A mean over seeds and, when the seeds differ, their range."""
    return num(value, 3) + (f" [{span[0]:+.2f}, {span[1]:+.2f}]" if span and span[0] != span[1] else "")


def discovery(p: dict) -> list[str]:
    return table(["gap", "arm", "adopted"], [[r["gap"], r["arm"], f"{r['recovered']}/{r['seeds']}"]
                                               for r in p["rows"]])


def served(p: dict) -> list[str]:
    from evosyn.benchmarks.served import adoption_lines, bucket_lines

    t, a = p["target"], p["agent"]
    head = (f"{p['domain']}, {p['rounds']} rounds x {p['budget']} blueprints, test sets of {p['test_size']}, a probe "
            f"set of {p['probe_size']} per round; the agent fails every task with {p['property']} in "
            f"{', '.join(p['weak_buckets'])}. Target: evosyn adopts {p['property']} in >= {t['evosyn_at_least']} "
            f"seeds, no_feedback in <= {t['no_feedback_at_most']}: **{'met' if p['met'] else 'not met'}**.")
    return [head, "", *table(["arm", f"{p['property']} adopted", "per seed (round, rule)", "all promoted (round)"],
                             adoption_lines(p)),
            ("The served agent's success over every evaluation of the runs, by the task's write count "
             f"({a['requests']} requests; {a['misses']} conversations it could not place):"), "",
            *table([p["property"], "evaluations", "success", "planted to fail"], bucket_lines(p))]


def sweep(p: dict) -> list[str]:
    from evosyn.benchmarks.sweep import HEADERS, rows, summary

    return [summary(p), "", *table(HEADERS, rows(p))]


def scalars(p: dict) -> list[str]:
    """The JSON's top-level numbers, flags and words: for a benchmark whose figures have no table here yet."""
    skip = {"benchmark", "machine", "invocation"}
    return table(["figure", "value"], [[k, num(v, 3) if isinstance(v, float) else v] for k, v in p.items()
                                       if k not in skip and isinstance(v, (int, float, str, bool))])


SECTIONS = [
    Section("synth", "Synthesis throughput", "Verified tasks per second of one pass of the round's stages "
            "(design, generate, rollout, verify) with the embedded backend, and CPU per verified task by stage.",
            "evosyn bench synth --n 500 --seed 0", "one pass, no repetition: no spread", synth),
    Section("testsets", "Fixed test sets", "Build time (CPU and wall) of a domain's two fixed test sets from "
            "scratch, their sizes and their distance from the target distribution.",
            "evosyn bench testsets --n 300", "one build, no repetition: no spread", testsets,
            seeds="the test sets' own, fixed (in their run ids below)"),
    Section("verify", "Verifier vs tau2's evaluator", "CPU and wall per task of EvoSyn's verifier against tau2's "
            "evaluator on the official tasks with gold actions, and whether their rewards agree.",
            "evosyn bench verify --split base", "means over the tasks; one pass: no spread", verify),
    Section("learner", "Embedded learner", "The embedded learner's success on the fixed test set by training-set "
            "size, its training and evaluation CPU, and the multi-write ablation.",
            "evosyn bench learner", "one training per size; ± is the binomial standard error "
            "over the test tasks", learner),
    Section("run", "The main job", "`evosyn run` in a fresh store, as a subprocess: wall and CPU by start-up, "
            "stage, orchestration, tracking and store.", "evosyn bench run --rounds 3 --seed 0",
            "one run, no repetition: no spread", run),
    Section("query", "Store queries", "DuckDB over a million evaluation rows in the store's own layout: one "
            "run's rows, a per-slice success query, and `evosyn query \"select 1\"` start-up.", "evosyn bench query",
            "best of the repetitions, with min / median / max of their walls", query,
            seeds="0, fixed (the generator of the synthetic rows)"),
    Section("llm", "LLM client", "Planner-shaped structured calls against a local server with seconds of "
            "latency (lognormal) and an rpm limit answered with 429s: throughput against the bound that "
            "concurrency, latency and the limit set, the 429s met, failed calls, and a warm rerun over the cache.",
            "evosyn bench llm", "one run per concurrency; the server's latencies are drawn from the seed", llm),
    Section("faults", "Fault rows", "Kill-and-resume at every stage boundary, fuzzed replies, faulty and absent "
            "LLM servers, concurrent first use of a store, and a search for the API key in everything the runs wrote; "
            "kills and a full disk inside the first-time initialisations, random kills of the main PID only, "
            "damaged chunk files, and a hostile LLM server (areas init, random, damage, hostile); hostile inputs, "
            "user SQL, a damaged test set and unvouched files, broken user packs, and documented commands on every "
            "built-in domain (areas inputs, query, store, packs, domains).",
            "evosyn bench faults", "pass or fail per row", faults),
    Section("learning", "The learning effect", "Every arm x seed as a normal run, then test success per round "
            "with two-level bootstrap intervals and paired differences against evosyn.",
            "evosyn bench learning --seeds 0-4", "bootstrap confidence intervals over seeds and "
            "tasks (mean [lo, hi]), and the per-seed values", learning),
    Section("sweep", "Sweeps over workers", "A small sweep (domains x arms x seeds) run by `evosyn sweep` in one "
            "process, then by `evosyn sweep --submit deployment` on Prefect process workers sharing one store: wall "
            "and CPU of each, the speed-up, and whether both stores hold the same rows.",
            "evosyn bench sweep", "one sweep each way, no repetition: no spread", sweep),
    Section("discovery", "Planted-gap recovery", "Per planted gap, in how many seeds the evosyn arm and the "
            "no_feedback control promote the planted property to a factor (App. B.6).",
            "evosyn bench discovery --seeds 0-2", "counts over the seeds", discovery),
    Section("served", "A served learner's planted weakness", "A scripted agent served on 127.0.0.1 "
            "(`learner: served`) that replays the teacher's solutions but never makes a second write "
            "(benchmarks/served_agent.py): in how many seeds the evosyn arm and the no_feedback control adopt the "
            "property behind the weakness (num_write) in rounds 1..R-1.", "evosyn bench served --seeds 0-2",
            "counts over the seeds", served),
]


def load(results_dir: Path) -> list[dict[str, Any]]:
    """Every recorded benchmark JSON, in file-name order."""
    return [{**json.loads(path.read_text()), "_file": path.name} for path in sorted(results_dir.glob("*.json"))]


def machine_line(m: dict[str, Any]) -> str:
    if "cpu_model" not in m:  # recorded before the JSON named the CPU
        return f"{m.get('cpus')} CPUs, Python {m.get('python')}, {m.get('platform')} (CPU model not recorded)"
    start, end = m.get("load_average_start"), m.get("load_average_end")
    load = (f"; load average (1 min) {num(start[0] if start else None)} at start, {num(end[0] if end else None)} "
            "at end")
    note = f". Note: {m['note']}" if m.get("note") else ""
    return (f"{m['cpu_model']}, {m['cpus']} logical CPUs ({m.get('physical_cores')} physical, {m.get('usable_cpus')} "
            f"usable), {m.get('memory_gb')} GB, Python {m['python']}, {m['platform']}{load}{note}")


def entry(section: Section, p: dict[str, Any]) -> list[str]:
    inv, m = p.get("invocation") or {}, p.get("machine") or {}
    took = f", {inv['seconds']:.0f} s wall" if inv.get("seconds") is not None else ""
    own = p.get("_file", f"{p['benchmark']}.json")  # a second recording of one benchmark is told by its file
    title = f"`{p['benchmark']}`" + ("" if own == f"{p['benchmark']}.json" else f" (`{own}`)")
    return [f"### {title}", "",
            f"- Command: `{inv.get('command') or 'not recorded'}`",
            f"- Recorded: {m.get('when', 'not recorded')}{took}",
            f"- Machine: {machine_line(m)}",
            f"- Seeds: {inv.get('seeds') or p.get('seed', section.seeds)}",
            f"- Spread: {section.spread}", "", *section.figures(p)]


def render(results_dir: Path = RESULTS_DIR) -> str:
    recorded = load(results_dir)
    by_key: dict[str, list[dict]] = {}
    for p in recorded:
        by_key.setdefault(p["benchmark"].split("-")[0], []).append(p)
    known = {s.key for s in SECTIONS}
    unknown = sorted(k for k in by_key if k not in known)
    sections = SECTIONS + [Section(k, k, "(no description yet)", f"evosyn bench {k}", "as recorded", scalars)
                           for k in unknown]
    intro = ("Written by `evosyn bench results` from `benchmarks/results/*.json`; do not edit by hand. To record a "
             "benchmark, run its command with `--output benchmarks/results/<name>.json` (add `evosyn bench --note "
             "TEXT ...` to say how the machine was shared), then `evosyn bench results`.")
    out = ["# Benchmark results", "", intro, ""]
    for s in sections:
        out += [f"## {s.title} (`evosyn bench {s.key}`)", "", s.measures, ""]
        if s.key not in by_key:
            out += [f"Not yet measured on record. Command: `{s.record}`.", ""]
        for p in by_key.get(s.key, []):
            out += entry(s, p)
    return "\n".join(out).rstrip("\n") + "\n"
