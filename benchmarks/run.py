"""`evosyn bench run`: the main job (`evosyn run`) in a fresh store, as a subprocess, with its time taken apart.

The job runs through ``evosyn.benchmarks.run_child`` (the `evosyn` command plus timers, tasks/timing.py), so its
start-up (interpreter, imports, the Prefect API) is counted like a user's. From the spans it records:

- start-up: launch to the run flow's call (interpreter, imports, CLI checks, settling the Prefect API);
- each stage: the wall and thread CPU of the pure stage functions its Prefect tasks wrap;
- orchestration: each task's wall (CPU) at its call site minus the wall (CPU) of the functions it wraps,
  plus each flow call minus its body; also the run flow's whole CPU minus all our own work (Prefect's
  background threads: API client, events, log shipping);
- tracking (MLflow) and store (Parquet writes and reads): every `Tracker` and `Store` call; a store call
  made inside a stage is part of that stage's time as well (the table says so);
- exit: the run flow's return to the process's end (Prefect's flush, the temporary server's stop).

Total CPU is the subprocess's and its children's (the temporary Prefect server runs in a child).
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

STAGES = ("design", "plan", "generate", "rollout", "verify", "dedup", "train", "evaluate", "reflect")
MAPPED = "generate+rollout+verify"  # one call site: the three mapped stages overlap chunk by chunk


class BenchRunError(RuntimeError):
    """The job under measurement failed (its last lines of output say why)."""


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def launch(workdir: Path, domain: str, rounds: int, seed: int, budget: int | None) -> dict[str, Any]:
    """Run the job once in ``workdir``/store (made fresh); returns the child's spans plus the outside figures."""
    from evosyn.tasks import timing

    store = workdir / "store"
    if store.exists():
        shutil.rmtree(store)
    store.mkdir(parents=True)
    timing_file = workdir / "timing.json"
    timing_file.unlink(missing_ok=True)
    args = ["--home", str(store), "run", "--domain", domain, "--rounds", str(rounds), "--seed", str(seed), "--quiet"]
    if budget is not None:
        args += ["--budget", str(budget)]
    env = {**os.environ, timing.ENV: str(timing_file)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()  # CLOCK_MONOTONIC: the child's perf_counter reads the same clock
    proc = subprocess.run([sys.executable, "-m", "evosyn.benchmarks.run_child", *args], env=env, capture_output=True,
                          text=True, check=False)
    t1 = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise BenchRunError(f"`evosyn {' '.join(args)}` exited {proc.returncode}:\n{tail}")
    data = timing.load(timing_file)
    data.update(launched=t0, ended=t1, cpu_total=_cpu(after) - _cpu(before), maxrss_kb=after.ru_maxrss,
                args=args, stdout=proc.stdout)
    return data


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _top(spans: list[dict], prefix: str) -> list[dict]:
    """The ``own`` spans named ``prefix``.*, without those inside another of them (a read inside a read)."""
    return [s for s in spans if s["kind"] == "own" and s["name"].startswith(prefix)
            and not any(u.startswith(f"own:{prefix}") for u in s["under"])]


def _within(spans: list[dict], outer: dict) -> list[dict]:
    return [s for s in spans if s["start"] >= outer["start"] and s["end"] <= outer["end"]]


def breakdown(data: dict[str, Any]) -> dict[str, Any]:
    """The stage table (rows of name, wall, CPU, note) and the headline figures from one launch's data."""
    spans, marks = data["spans"], data["marks"]
    t0, t1 = data["launched"], data["ended"]
    wall = t1 - t0
    by = lambda kind, name=None: [s for s in spans if s["kind"] == kind and name in (None, s["name"])]  # noqa: E731
    (run_call,) = by("flow", "run")
    (run_body,) = by("body", "run")
    fns = by("fn")
    rows: list[dict[str, Any]] = []

    def row(name: str, wall_s: float, cpu_s: float | None, note: str = "", group: str = "") -> None:
        rows.append({"part": name, "group": group, "wall_s": wall_s, "cpu_s": cpu_s, "note": note})

    # start-up: launch -> the run flow's call; the run's modules are imported while a temporary server starts
    interp, cli = marks["interpreter"], marks["cli imported"]
    api = by("startup", "prefect api")
    api_wall, api_cpu = (api[0]["end"] - api[0]["start"], api[0]["pcpu"]) if api else (0.0, 0.0)
    imp = by("startup", "run imports")
    imp_wall, imp_cpu = (imp[0]["end"] - imp[0]["start"], imp[0]["pcpu"]) if imp else (0.0, 0.0)
    startup_wall = run_call["start"] - t0
    startup_cpu = run_call["pstart"]  # the child's CPU from its start (its server's start is counted later)
    row("interpreter", interp["at"] - t0, interp["pcpu"], group="start-up")
    row("imports", cli["at"] - interp["at"] + imp_wall, cli["pcpu"] - interp["pcpu"] + imp_cpu,
        f"the command line {cli['at'] - interp['at']:.2f}s, then the run's modules {imp_wall:.2f}s while the "
        "Prefect API is settled", group="start-up")
    row("prefect api", api_wall - imp_wall, api_cpu - imp_cpu, "waiting for the API beyond those imports (a "
        "temporary server starts in its own process)", group="start-up")
    rest = startup_wall - (cli["at"] - t0) - api_wall
    row("checks", rest, startup_cpu - cli["pcpu"] - api_cpu, "config, inputs, store", group="start-up")

    # stages: the pure functions, and the store calls made inside them
    stores = _top(spans, "store.")
    for stage in STAGES:
        mine = [s for s in fns if s["name"] == stage]
        inside = [s for s in stores if f"fn:{stage}" in s["under"]]
        row(stage, _union([(s["start"], s["end"]) for s in mine]), sum(s["cpu"] for s in mine),
            f"{len(mine)} calls; store {sum(s['end'] - s['start'] for s in inside):.2f}s", group="stages")

    # our own work outside the tasks
    tracking = _top(spans, "tracking.")
    own_named = {"test set": by("own", "test set"), "metrics": by("own", "metrics"),
                 "artifacts": by("own", "artifacts")}
    for name, ss in own_named.items():
        row(name, sum(s["end"] - s["start"] for s in ss), sum(s["cpu"] for s in ss), group="own work")
    row("tracking (mlflow)", sum(s["end"] - s["start"] for s in tracking), sum(s["cpu"] for s in tracking),
        f"{len(tracking)} calls", group="own work")
    outside = [s for s in stores if not any(u.startswith(("fn:", "own:")) for u in s["under"])]
    row("store (parquet)", sum(s["end"] - s["start"] for s in stores), sum(s["cpu"] for s in stores),
        f"{len(stores)} calls; {sum(s['end'] - s['start'] for s in outside):.2f}s outside the stages "
        "(the rest is in the stage rows)", group="own work")

    # orchestration: task call sites minus the functions inside them; flow calls minus their bodies
    orch_wall = orch_cpu = 0.0
    calls = []  # per task call, for a reader who wants to see which calls the engine's time went to
    for call in by("task"):
        inner = [s for s in _within(fns, call) if s["round"] == call["round"]]
        fn_wall, fn_cpu = _union([(s["start"], s["end"]) for s in inner]), sum(s["cpu"] for s in inner)
        orch_wall += (call["end"] - call["start"]) - fn_wall
        orch_cpu += call["pcpu"] - fn_cpu
        calls.append({"task": call["name"], "round": call["round"], "wall_s": call["end"] - call["start"],
                      "fn_wall_s": fn_wall, "cpu_s": call["pcpu"], "fn_thread_cpu_s": fn_cpu})
    tasks_wall, tasks_cpu = orch_wall, orch_cpu
    flow_wall = flow_cpu = 0.0
    for call in by("flow"):
        body = [b for b in by("body") if b["name"] == call["name"] and b["round"] == call["round"]]
        if body:
            flow_wall += (call["end"] - call["start"]) - (body[0]["end"] - body[0]["start"])
            flow_cpu += call["pcpu"] - body[0]["pcpu"]
    row("task engine", tasks_wall, tasks_cpu, f"{len(by('task'))} task calls: call wall minus the stage inside",
        group="orchestration")
    row("flow engine", flow_wall, flow_cpu, f"{len(by('flow'))} flow calls: call minus body", group="orchestration")
    work = [s for s in fns] + [s for s in spans if s["kind"] == "own" and not any(
        u.startswith(("fn:", "own:")) for u in s["under"])]
    background = run_call["pcpu"] - sum(s["cpu"] for s in work)
    exit_wall = t1 - run_call["end"]
    usage = data["usage"]
    server_cpu = usage["cpu_children"]  # read after Prefect's exit handler has stopped (and reaped) it
    # the run flow's return to the end: Prefect's exit handlers, then the interpreter's teardown (after the dump)
    exit_cpu = data["cpu_total"] - server_cpu - run_call["pstart"] - run_call["pcpu"]
    row("exit", exit_wall, exit_cpu, "Prefect's exit handlers, the server's stop, the interpreter's teardown",
        group="start-up")
    row("prefect server", 0.0, server_cpu, "CPU of the temporary API server (a child process; 0 when another "
        "server is used)", group="orchestration")

    startup_and_exit_wall = startup_wall + exit_wall
    orchestration_wall = tasks_wall + flow_wall
    cpu_total = data["cpu_total"]
    overhead_cpu = startup_cpu + exit_cpu + background + server_cpu
    order = ["start-up", "stages", "own work", "orchestration"]
    rows.sort(key=lambda r: order.index(r["group"]))  # stable: each group keeps its own order
    return {
        "rows": rows, "task_calls": calls, "wall_s": wall, "cpu_s": cpu_total, "cpu_self_s": usage["cpu_self"],
        "peak_rss_mb": max(usage["maxrss_kb"], data["maxrss_kb"]) / 1024,
        "startup_wall_s": startup_and_exit_wall, "orchestration_wall_s": orchestration_wall,
        "overhead_wall_share": (startup_and_exit_wall + orchestration_wall) / wall,
        "orchestration_cpu_s": background + server_cpu, "startup_cpu_s": startup_cpu + exit_cpu,
        "overhead_cpu_share": overhead_cpu / cpu_total if cpu_total else 0.0,
    }


def learner_work(store_root: Path) -> dict[str, Any]:
    """What the job's learner stages worked through, read back from its store: the tasks it evaluated (every
    set, every round) and the trajectories it trained on (a round trains on every training example of its
    rounds so far, so each example counts once per round that trains on it)."""
    from evosyn.storage.store import Store

    store = Store(store_root)
    evaluated, trained, per_round = 0, 0, []
    for run_id in store.runs():
        added: dict[int, int] = {}
        for e in store.read_fields("sft_examples", ["round", "split"], run_id=run_id):
            added[e["round"]] = added.get(e["round"], 0) + (e["split"] == "train")
        evals = Counter(e["round"] for e in store.read_fields("evaluations", ["round"], run_id=run_id))
        so_far = 0
        for r in sorted({*added, *evals}):
            so_far += added.get(r, 0)
            n_eval = evals[r]
            per_round.append({"run_id": run_id, "round": r, "trained_on": so_far, "evaluated": n_eval})
            evaluated += n_eval
            trained += so_far
    return {"evaluated_tasks": evaluated, "trained_trajectories": trained, "per_round": per_round}


def verified_yield(store_root: Path) -> list[dict[str, Any]]:
    """Per run and round: the blueprints whose task was verified (a passed verdict), against the round's budget."""
    from evosyn.storage.store import Store

    store = Store(store_root)
    out = []
    for run_id in store.runs():
        budget = store.read_records("runs", run_id=run_id, round=0)[-1].budget
        kept: dict[int, set] = {}
        for v in store.read_fields("verdicts", ["round", "blueprint_id", "passed"], run_id=run_id):
            if v["passed"] and v["round"] >= 1:
                kept.setdefault(v["round"], set()).add(v["blueprint_id"])
        out += [{"run_id": run_id, "round": r, "verified": len(ids), "budget": budget,
                 "yield": round(len(ids) / budget, 3)} for r, ids in sorted(kept.items())]
    return out


def run(domain: str, rounds: int, seed: int, budget: int | None = None, workdir: str | None = None
        ) -> dict[str, Any]:
    """Launch the job once and take its time apart (a ``workdir`` is kept; the default temporary one is not)."""
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="evosyn-bench-run-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        data = launch(base, domain, rounds, seed, budget)
        work = learner_work(base / "store")
        yields = verified_yield(base / "store")
    finally:
        if not workdir:
            shutil.rmtree(base, ignore_errors=True)
    result = breakdown(data)
    stage_cpu = {r["part"]: r["cpu_s"] for r in result["rows"] if r["group"] == "stages"}
    work.update(evaluate_cpu_ms_per_task=1000 * stage_cpu["evaluate"] / max(1, work["evaluated_tasks"]),
                train_cpu_ms_per_trajectory=1000 * stage_cpu["train"] / max(1, work["trained_trajectories"]))
    result["learner_work"] = work
    result["verified_yield"] = yields
    result.update(domain=domain, rounds=rounds, seed=seed, budget=budget,
                  command="evosyn " + " ".join(data["args"][2:]),  # without --home <the fresh store>
                  store=str(base / "store") if workdir else None)
    return result
