"""Shared benchmark plumbing: the JSON every `evosyn bench …` command writes, with what a reader needs to weigh
its figures besides them: the machine (CPU model, cores, its load at start and end), the command line, the seeds.

The ``bench`` group (benchmarks/cli.py) stamps the start of each command into click's ``ctx.meta`` (shared by
nested contexts), and ``write_json`` reads it back with the command's own parameters, so every benchmark
records the same facts without each command repeating them.
"""
from __future__ import annotations

import os
import platform
import shlex
import statistics
import time
from pathlib import Path
from typing import Any

import click
import psutil

from evosyn.storage import atomic

START = "evosyn.bench.start"  # the ctx.meta key of the start facts


def cpu_model() -> str:
    """The CPU's model name."""
    # platform.processor() is empty on most Linux builds; the kernel names the model in /proc/cpuinfo
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def started(note: str | None = None) -> dict[str, Any]:
    """The facts taken when a benchmark starts: the time and the load the machine already had."""
    return {"at": time.time(), "load_average": list(os.getloadavg()), "note": note}


def machine(start: dict[str, Any] | None = None) -> dict[str, Any]:
    """The machine and its load: a load average near the CPU count means the CPUs were shared while it ran."""
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "cpu_model": cpu_model(),
            "physical_cores": psutil.cpu_count(logical=False), "usable_cpus": len(affinity) if affinity else None,
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1), "platform": platform.platform(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "load_average_start": start["load_average"] if start else None,
            "load_average_end": list(os.getloadavg()), "note": start["note"] if start else None}


def command_line(ctx: click.Context) -> str:
    """The command as a user types it, every option spelled out (defaults too), so a rerun needs no guessing."""
    words = ["evosyn", *ctx.command_path.split()[1:]]  # the root's name is the test runner's under CliRunner
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if not isinstance(param, click.Option) or value is None or value == ():
            continue
        flag = max(param.opts, key=len)
        if param.is_flag:
            words += [flag] if value else []
        else:
            words += [w for v in (value if param.multiple else [value]) for w in (flag, str(v))]
    return shlex.join(words)


def invocation(ctx: click.Context | None, start: dict[str, Any] | None) -> dict[str, Any]:
    """The command line, its seeds (``--seed`` / ``--seeds`` where the benchmark has them) and its wall time."""
    if ctx is None:
        return {"command": None, "seeds": None, "seconds": None}
    seeds = ctx.params.get("seeds", ctx.params.get("seed"))
    return {"command": command_line(ctx), "seeds": None if seeds is None else str(seeds),
            "seconds": round(time.time() - start["at"], 1) if start else None}


def spread(values: list[float]) -> dict[str, float | int]:
    """Min, median and max of repeated measurements, and how many there were."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def write_json(name: str, payload: dict[str, Any], output: str | os.PathLike[str] | None = None) -> Path:
    """The benchmark's JSON: its name, the machine, the invocation, then its own figures."""
    ctx = click.get_current_context(silent=True)
    start = ctx.meta.get(START) if ctx else None
    path = Path(output) if output else Path("bench-results") / f"{name}.json"
    atomic.write_json(path, {"benchmark": name, "machine": machine(start), "invocation": invocation(ctx, start),
                             **payload}, indent=2, default=str)
    return path
