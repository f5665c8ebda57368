"""`evosyn bench learning`: arms x seeds of the closed loop on one store, with intervals.

Each (arm, seed) is a normal run (`evosyn run`, in parallel subprocesses, ``jobs`` at a time) of the same
config but its arm and seed, with the stop rule off (``stop_after_static_rounds: 0``), so every arm runs the
same rounds and blueprints (the per-arm knobs: ``tasks/loop.py``). Run ids hash the config, so a rerun of
the benchmark reuses each finished run and resumes an unfinished one.

Reported, from the store:

- per run and round: success on every shared test set (each evaluation ``task_set`` but the run's own
  ``diagnostic`` one: ``test``, ``test_uniform``, ...), the four intrinsic metrics of the verified data so far
  (trajectory diversity normalized by the union of patterns of every run of the benchmark), and the
  controllability before the gate of every ordinal factor the round's blueprints requested;
- per arm, set and round: mean success over seeds and its 95% interval by a two-level bootstrap (seeds, then
  tasks within a seed: ``evosyn.benchmarks.bootstrap``); per other arm, the paired difference ``evosyn - arm`` (by
  seed and task) with its interval; the intrinsic metrics' mean and seed-bootstrap interval;
- evosyn's promoted factors (those its Reflector added) and their controllability per round;
- within-space adaptation per arm, set and round (``evosyn.benchmarks.adaptation``): the gap-allocation Spearman
  (a slice's allocation gain against its success gap) and the targeted improvement rate;
- at the last round, where the paired differences come from: per slice of each test set (one value of one
  observed factor of its tasks) each arm's success and ``evosyn - arm`` with its interval, and the slices no
  arm solves in any round (``evosyn.benchmarks.learning_slices``).
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from evosyn.benchmarks.adaptation import adaptation, allocation
from evosyn.benchmarks.bootstrap import LEVEL, RESAMPLES, paired, two_level
from evosyn.benchmarks.learning_slices import common_tasks, slices
from evosyn.config import ENV_OVERRIDES
from evosyn.storage.records import Arm

if TYPE_CHECKING:
    from evosyn.envs.base import Domain
    from evosyn.envs.packs import DomainPack

DEFAULT_ARMS = ("evosyn", "static", "no_feedback")
BASELINE = "evosyn"
INTRINSIC = ("factor_coverage", "factor_balance", "interaction_coverage", "trajectory_diversity")
OWN_SETS = ("diagnostic", "probe")  # each run's own sets (held out; a Reflector's probes): never compared


class BenchInputError(ValueError):
    """A bad option value: one line naming the option and the fix."""


class BenchRunError(RuntimeError):
    """A run of the benchmark failed (its last lines of output say why)."""


def parse_seeds(text: str) -> list[int]:
    """``0-4`` (inclusive), ``3``, or ``0,2,5``: distinct non-negative seeds, in order."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        if not (lo.isdigit() and (not sep or hi.isdigit())):
            raise BenchInputError(f"--seeds {text}: {part!r} is not a seed or a range (write e.g. 0-4, 3 or 0,2,5)")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise BenchInputError(f"--seeds {text}: the range {part} ends before it starts (write LO-HI with "
                                  f"LO <= HI, e.g. {b}-{a})")
        seeds += [s for s in range(a, b + 1) if s not in seeds]
    return seeds


def parse_arms(text: str) -> list[str]:
    """Comma-separated arms, each one of ``evosyn.storage.records.Arm``."""
    known = get_args(Arm)
    arms = list(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    bad = [a for a in arms if a not in known]
    if bad or not arms:
        raise BenchInputError(f"--arms {text}: {'unknown arm ' + bad[0] if bad else 'no arm'} (known arms: "
                              f"{', '.join(known)})")
    return arms


@dataclass(frozen=True)
class Plan:
    domain: str
    seeds: list[int]
    home: Path
    arms: list[str] = field(default_factory=lambda: list(DEFAULT_ARMS))
    rounds: int = 3
    budget: int = 200
    test_size: int = 300
    jobs: int = 2
    extra: dict[str, Any] = field(default_factory=dict)  # more config fields, the same for every run (a prior)
    name: str = "learning"  # the benchmark: its work folder under the store's bench/

    def config(self, arm: str, seed: int) -> dict[str, Any]:
        """The run config of one (arm, seed): the same for every arm but the arm."""
        return {"domain": self.domain, "arm": arm, "seed": seed, "rounds": self.rounds, "budget": self.budget,
                "test_size": self.test_size, "stop_after_static_rounds": 0, **self.extra}


@dataclass
class Launched:
    arm: str
    seed: int
    run_id: str
    reused: bool = False
    wall_s: float = 0.0


def _run_id(plan: Plan, arm: str, seed: int) -> str:
    from evosyn.flows.run import run_id_for
    from evosyn.config import validate_config

    return run_id_for(validate_config(plan.config(arm, seed)))


def _finished(store, run_id: str) -> bool:
    runs = store.read_records("runs", run_id=run_id)
    return bool(runs) and runs[0].status == "finished"


def _launch_one(plan: Plan, job: Launched, work: Path) -> Launched:
    import yaml

    cfg = work / f"{job.run_id}.yaml"
    cfg.write_text(yaml.safe_dump(plan.config(job.arm, job.seed), sort_keys=False))
    log = work / f"{job.run_id}.log"
    t0 = time.perf_counter()
    # the EVOSYN_* overrides (seed, arm, rounds, ...) would override the file: each run gets exactly its config
    env = {k: v for k, v in os.environ.items() if k not in ENV_OVERRIDES} | {"EVOSYN_HOME": str(plan.home)}
    with log.open("w") as out:
        proc = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "--home", str(plan.home), "run", "--config",
                               str(cfg), "--quiet"], stdout=out, stderr=subprocess.STDOUT, check=False, env=env)
    job.wall_s = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").strip().splitlines()[-5:])
        raise BenchRunError(f"run {job.run_id} ({job.arm}, seed {job.seed}) exited {proc.returncode} (log {log}):"
                            f"\n{tail}")
    from evosyn.storage.store import Store

    if not _finished(Store(plan.home, create=False), job.run_id):  # the run's own id is not the one hashed here
        raise BenchRunError(f"run {job.run_id} ({job.arm}, seed {job.seed}) exited 0 but is not finished in "
                            f"{plan.home} (log {log})")
    return job


def launch(plan: Plan, say=lambda s: None) -> tuple[list[Launched], float]:
    """Every (arm, seed) run finished in the store: the finished ones reused, the others run (``jobs`` at a
    time, each as `evosyn run`). Returns the runs and the CPU seconds of the subprocesses."""
    from evosyn.storage.store import Store

    store = Store(plan.home)
    work = plan.home / "bench" / plan.name
    work.mkdir(parents=True, exist_ok=True)
    jobs = [Launched(arm, seed, _run_id(plan, arm, seed)) for seed in plan.seeds for arm in plan.arms]
    todo = []
    for job in jobs:
        job.reused = _finished(store, job.run_id)
        if not job.reused:
            todo.append(job)
    say(f"{len(jobs)} runs: {len(jobs) - len(todo)} reused from {plan.home}, {len(todo)} to run, "
        f"{plan.jobs} at a time")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with ThreadPoolExecutor(max_workers=plan.jobs) as pool:
        for job in pool.map(lambda j: _launch_one(plan, j, work), todo):
            say(f"finished {job.run_id} ({job.arm}, seed {job.seed}) in {job.wall_s:.1f}s")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return jobs, cpu


def _outcomes(store, run_id: str) -> tuple[dict[tuple[str, int], dict[str, float]], dict[str, dict[str, dict]]]:
    """(task set, round) -> task id -> success (the mean over trials, where a set has several); and
    task set -> task id -> the task's observed factors."""
    acc: dict[tuple[str, int], dict[str, list[float]]] = {}
    observed: dict[str, dict[str, dict]] = {}
    for e in store.read_records("evaluations", run_id=run_id):
        if e.task_set not in OWN_SETS:
            acc.setdefault((e.task_set, e.round), {}).setdefault(e.task_id, []).append(float(e.success))
            observed.setdefault(e.task_set, {})[e.task_id] = e.observed
    return {k: {t: sum(v) / len(v) for t, v in by_task.items()} for k, by_task in acc.items()}, observed


def _promoted(store, run_id: str) -> list[str]:
    """Factors the run's Reflector added to its space (in the last space, not in the initial one)."""
    spaces = sorted(store.read_records("spaces", run_id=run_id), key=lambda s: (s.round, s.version))
    if not spaces:
        return []
    initial = {f.key for f in spaces[0].factors}
    return [f.key for f in spaces[-1].factors if f.key not in initial]


def _run_seconds(store, run_id: str) -> float | None:
    """The run's own duration, as its summary has it (also for a run reused from an earlier benchmark)."""
    import json

    path = store.root / f"summary-{run_id}.json"
    return json.loads(path.read_text()).get("seconds") if path.is_file() else None


def collect(plan: Plan, jobs: list[Launched], pack: DomainPack) -> list[dict]:
    """Per run: its rounds' success per shared test set, intrinsic metrics and controllability (``pack``: the
    runs' domain's, as the command resolved it)."""
    from evosyn.tasks.metrics import intrinsic, round_controllability, verified_samples
    from evosyn.storage.store import Store

    store = Store(plan.home, create=False)
    samples = {j.run_id: verified_samples(store, j.run_id) for j in jobs}
    union = {s["pattern"] for ss in samples.values() for s in ss}
    out = []
    for j in jobs:
        outcomes, observed = _outcomes(store, j.run_id)
        rounds = []
        for r in sorted({r for _, r in outcomes} | {s["round"] for s in samples[j.run_id]}):
            m = intrinsic([s for s in samples[j.run_id] if s["round"] <= r], pack, union)
            m["trajectory_diversity"] = m["trajectory_diversity_union"]  # comparable across the runs
            rounds.append({"round": r, "success": {ts: float(np.mean(list(v.values())))
                                                   for (ts, rr), v in sorted(outcomes.items()) if rr == r},
                           "n_tasks": {ts: len(v) for (ts, rr), v in sorted(outcomes.items()) if rr == r},
                           **{k: m[k] for k in INTRINSIC},
                           "controllability": round_controllability(store, j.run_id, pack, r)})
        out.append({"arm": j.arm, "seed": j.seed, "run_id": j.run_id, "reused": j.reused, "wall_s": j.wall_s,
                    "run_seconds": _run_seconds(store, j.run_id),
                    "promoted": _promoted(store, j.run_id), "rounds": rounds, "_outcomes": outcomes,
                    "_observed": observed, "_allocation": allocation(store, j.run_id)})
    return out


def _matrix(runs: list[dict], key: tuple[str, int], tasks: list[str]) -> np.ndarray:
    return np.array([[r["_outcomes"][key][t] for t in tasks] for r in runs])


def analyze(plan: Plan, runs: list[dict], resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Per arm, set and round the two-level bootstrap interval of success; the paired ``evosyn - arm``
    differences; the intrinsic metrics' means and seed intervals; evosyn's promoted factors' controllability."""
    keys = sorted({k for r in runs for k in r["_outcomes"]})
    success, diffs, sets = [], [], {}
    for key in keys:
        have = [r for r in runs if key in r["_outcomes"]]
        tasks = common_tasks(runs, key)
        sets.setdefault(key[0], len(tasks))
        if not tasks:
            continue
        by_arm = {a: sorted((r for r in have if r["arm"] == a), key=lambda r: r["seed"]) for a in plan.arms}
        for arm, rs in by_arm.items():
            if rs:
                ci = two_level(_matrix(rs, key, tasks), resamples, seed)
                success.append({"set": key[0], "round": key[1], "arm": arm, **ci,
                                "per_seed": {str(r["seed"]): float(np.mean([r["_outcomes"][key][t] for t in tasks]))
                                             for r in rs}})
        if BASELINE not in by_arm:
            continue
        for arm in [a for a in plan.arms if a != BASELINE]:
            seeds = sorted({r["seed"] for r in by_arm[BASELINE]} & {r["seed"] for r in by_arm[arm]})
            if seeds:
                a, b = ([r for r in by_arm[x] if r["seed"] in seeds] for x in (BASELINE, arm))
                d = paired(_matrix(a, key, tasks), _matrix(b, key, tasks), resamples, seed)
                diffs.append({"set": key[0], "round": key[1], "a": BASELINE, "b": arm, **d})
    intrinsic = []
    for arm in plan.arms:
        for rnd in sorted({x["round"] for r in runs if r["arm"] == arm for x in r["rounds"]}):
            rows = [x for r in runs if r["arm"] == arm for x in r["rounds"] if x["round"] == rnd]
            for metric in INTRINSIC:
                ci = two_level(np.array([[x[metric]] for x in rows]), resamples, seed)
                intrinsic.append({"arm": arm, "round": rnd, "metric": metric, "mean": ci["mean"], "lo": ci["lo"],
                                  "hi": ci["hi"], "n_seeds": ci["n_seeds"]})
    return {"test_sets": sets, "success": success, "paired": diffs, "intrinsic": intrinsic,
            "controllability": _controllability(runs), "adaptation": adaptation(runs, plan.arms),
            "slices": slices(runs, plan.arms, BASELINE, resamples, seed)}


def _controllability(runs: list[dict]) -> list[dict]:
    """For each factor evosyn's Reflector promoted (in any seed), per round it was requested: the mean over
    evosyn's seeds of exact match and Spearman, and the requests and realizations pooled."""
    evo = [r for r in runs if r["arm"] == BASELINE]
    out = []
    for factor in sorted({f for r in evo for f in r["promoted"]}):
        for rnd in sorted({x["round"] for r in evo for x in r["rounds"] if factor in x["controllability"]}):
            cs = [x["controllability"][factor] for r in evo for x in r["rounds"]
                  if x["round"] == rnd and factor in x["controllability"]]
            rho = [c["spearman"] for c in cs if not np.isnan(c["spearman"])]
            out.append({"factor": factor, "round": rnd, "seeds": len(cs),
                        "exact": float(np.mean([c["exact"] for c in cs])),
                        "spearman": float(np.mean(rho)) if rho else float("nan"),
                        "n_requested": int(sum(c["n_requested"] for c in cs)),
                        "n_realized": int(sum(c["n_realized"] for c in cs))})
    return out


def _probe_size(plan: Plan) -> int:
    """The probe set a round of the plan's feedback arm reads (the runs' default unless the plan names one)."""
    from evosyn.config import default_probe_size

    named = plan.extra.get("probe_size")
    return default_probe_size(plan.budget) if named is None else named


def bench(plan: Plan, env: Domain, say=lambda s: None, resamples: int = RESAMPLES) -> dict[str, Any]:
    """``env``: the environment of ``plan.domain``, as the command resolved it."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    jobs, child_cpu = launch(plan, say)
    wall_runs = time.perf_counter() - t0
    runs = collect(plan, jobs, env.pack)
    result = analyze(plan, runs, resamples)
    for r in runs:
        r.pop("_outcomes")
        r.pop("_observed", None)
        r.pop("_allocation", None)
    return {"domain": plan.domain, "seeds": plan.seeds, "arms": plan.arms, "rounds": plan.rounds,
            "budget": plan.budget, "test_size": plan.test_size, "jobs": plan.jobs, "home": str(plan.home),
            "probe_size": _probe_size(plan),
            "stop_after_static_rounds": 0, "resamples": resamples, "level": LEVEL,
            "bootstrap": "two-level: seeds with replacement, then test tasks with replacement within each seed; "
                         "percentile interval; paired differences resample per-(seed, task) differences",
            "wall_s": time.perf_counter() - t0, "runs_wall_s": wall_runs,
            "cpu_s": child_cpu + time.process_time() - cpu0, "runs_cpu_s": child_cpu,
            "runs_launched": sum(not j.reused for j in jobs), "runs_reused": sum(j.reused for j in jobs),
            "runs": runs, **result}
