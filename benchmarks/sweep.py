"""`evosyn bench sweep`: one small sweep run serially, then on several Prefect workers; wall, CPU, speed-up.

Both runs use one Prefect server (``benchmarks/sweep_stack.py``), so neither pays for a temporary server's
start and the comparison is the fan-out alone. The serial sweep is `evosyn sweep` (every run a subflow of one
process); the other is `evosyn sweep --submit deployment`, every (domain, arm, seed) a flow run taken by one of
``workers`` process workers (one flow run each at a time), all writing one store folder. CPU counts every
process of each side: the sweep command and its children, and for the workers their processes and the flow
runs they waited for; the server's CPU is given apart (both sides use it). The two stores must hold the same
rows (table digests); the benchmark says whether they do.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import yaml

from evosyn.benchmarks.sweep_stack import WorkerStack
from evosyn.storage.digest import table_digests
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store

REPO = Path(__file__).resolve().parents[1]


class BenchSweepError(RuntimeError):
    """A sweep of the benchmark failed (its output's tail says why)."""


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _tree_cpu(pids: list[int]) -> float:
    """CPU seconds of these processes, with the children they waited for (the workers' flow runs)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _sweep(stack: WorkerStack, home: Path | str, config: Path, *extra: str) -> dict[str, float]:
    """One `evosyn sweep` as a subprocess: its wall, its CPU (with the workers'), the server's CPU."""
    workers = [s.pid for s in stack.worker_services]
    server = [stack.server.pid] if stack.server else []
    env = {**stack.env(), "EVOSYN_HOME": str(home), "PREFECT_API_URL": stack.api}
    c0, w0, s0, t0 = _children_cpu(), _tree_cpu(workers), _tree_cpu(server), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "--home", str(home), "sweep", "--config", str(config),
                           "--quiet", *extra], env=env, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise BenchSweepError(f"evosyn sweep {' '.join(extra)} failed: {(done.stdout + done.stderr)[-2000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(_children_cpu() - c0 + _tree_cpu(workers) - w0, 2),
            "server_cpu_s": round(_tree_cpu(server) - s0, 2)}


def _digests(home: Path | str) -> dict[str, str]:
    store = Store(home, create=False)
    return table_digests(store, store.runs(any_table=True))  # every run the sweep wrote, the test sets' included


def bench(domains: list[str], arms: list[str], seeds: list[int], rounds: int, budget: int, test_size: int,
          workers: int = 2, workdir: str | None = None, s3_root: str | None = None) -> dict[str, Any]:
    """The serial sweep and the same sweep over ``workers`` workers, in two fresh stores under ``workdir``; with
    ``s3_root`` (``s3://bucket/prefix``, reached through the AWS variables), both again on two fresh stores under
    it, their rows compared with the local serial sweep's."""
    base = Path(workdir or tempfile.mkdtemp(prefix="evosyn-bench-sweep-")).resolve()
    base.mkdir(parents=True, exist_ok=True)
    config = base / "sweep.yaml"
    config.write_text(yaml.safe_dump({"rounds": rounds, "budget": budget, "test_size": test_size,
                                      "sweep": {"domains": domains, "arms": arms, "seeds": seeds}}))
    try:
        with WorkerStack(base / "services", REPO, workers=workers) as stack:
            serial = _sweep(stack, base / "serial", config)
            fanned = _sweep(stack, base / "workers", config, "--submit", "deployment")
            if s3_root:  # a fresh prefix per benchmark: never another run's rows
                prefix = f"{s3_root.rstrip('/')}/bench-sweep-{uuid.uuid4().hex[:8]}"
                s3 = {"serial": _sweep(stack, f"{prefix}/serial", config),
                      "on_workers": _sweep(stack, f"{prefix}/workers", config, "--submit", "deployment")}
        want, got = _digests(base / "serial"), _digests(base / "workers")
        if s3_root:
            for way in ("serial", "workers"):
                s3_rows = _digests(f"{prefix}/{way}")
                s3[f"{way}_differing"] = [t for t in TABLES if want.get(t) != s3_rows.get(t)]
            s3.update(root=prefix, speedup=round(s3["serial"]["wall_s"] / s3["on_workers"]["wall_s"], 2),
                      rows_equal=not (s3["serial_differing"] or s3["workers_differing"]))
    finally:
        if not workdir:
            shutil.rmtree(base, ignore_errors=True)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {"grid": {"domains": domains, "arms": arms, "seeds": seeds, "rounds": rounds, "budget": budget,
                     "test_size": test_size},
            "runs": len(domains) * len(arms) * len(seeds), "workers": workers, "serial": serial,
            "on_workers": fanned, "speedup": round(serial["wall_s"] / fanned["wall_s"], 2),
            "ideal_speedup": min(workers, cpus),
            "rows_equal": want == got, "tables_differing": [t for t in TABLES if want.get(t) != got.get(t)],
            "workdir": str(base) if workdir else None, **({"s3": s3} if s3_root else {})}


HEADERS = ["sweep", "wall s", "CPU s", "server CPU s"]


def rows(p: dict[str, Any]) -> list[list[str]]:
    ways = [(f"{store}{name}", part[key]) for store, part in (("", p), ("S3 store: ", p.get("s3")))
            if part for name, key in (("serial (one process)", "serial"), (f"{p['workers']} workers", "on_workers"))]
    return [[name, f"{w['wall_s']:.1f}", f"{w['cpu_s']:.1f}", f"{w['server_cpu_s']:.1f}"] for name, w in ways]


def summary(p: dict[str, Any]) -> str:
    g = p["grid"]
    return (f"{p['runs']} runs ({', '.join(g['domains'])} x {', '.join(g['arms'])} x seeds "
            f"{', '.join(map(str, g['seeds']))}; {g['rounds']} round(s), budget {g['budget']}): speed-up {p['speedup']:.2f}x on {p['workers']} workers "
            f"(ideal here at most {p['ideal_speedup']}x); rows "
            + ("equal to the serial sweep's" if p["rows_equal"] else
               f"DIFFER from the serial sweep's in {', '.join(p['tables_differing'])}")
            + (f"; on the S3 store: speed-up {p['s3']['speedup']:.2f}x, rows "
               + ("equal to the local serial sweep's" if p["s3"]["rows_equal"] else "DIFFER from the local serial "
                  f"sweep's in {', '.join(sorted(set(p['s3']['serial_differing'] + p['s3']['workers_differing'])))}")
               if p.get("s3") else ""))
