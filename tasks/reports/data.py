"""What `evosyn report` shows, read from the store: per-round metrics, slices, allocation, probes, trace, samples.

Only the rounds that ran are shown: a round ran when its learner was evaluated (round 0, the base
learner, is not a round of the loop). The space stored for round r is the one its Reflector left for
round r + 1, so the trace lists r -> r + 1 only when round r + 1 ran, and an update made after the
last round as proposed for a round that did not run.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from evosyn.agents.feedback import wilson
from evosyn.envs.packs import default_domain
from evosyn.storage.records import Message
from evosyn.storage.store import Store
from evosyn.tasks.metrics import intrinsic, verified_samples
from evosyn.tasks.overlap import SET_LABEL, overlap, scored_metrics, scored_set

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

# domain name -> its environment, for every domain ``report_domains`` names: resolved once by the command
# (``evosyn.flows.compile.stored_domain``) and handed down, so nothing below looks a name up
Envs = Mapping[str, "Domain"]

SLICE_FACTORS = ("task_family", "expected_outcome", "num_write", "num_read")
PROBE_ORDER = ("num_write", "num_read", "entities_touched", "turns", "numeric_arguments", "transfers")
ANY = "(any)"


def _rate(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def domain_of(store: Store, run_id: str) -> str:
    runs = store.read_records("runs", run_id=run_id)
    return runs[0].domain if runs else default_domain()


def report_domains(store: Store, run_ids: list[str]) -> list[str]:
    """The domains a report over ``run_ids`` reads: each run's (``domain_of``), and those of the first run's
    tasks (its samples and its test sets, ``run_settings``); the command resolves each of them once."""
    from evosyn.tasks.dedup import run_settings

    names = {domain_of(store, rid) for rid in run_ids}
    if run_ids:
        names |= {t["domain"] for t in store.read_fields("tasks", ["domain"], run_id=run_ids[0])}
        names |= {d for d in run_settings(store, run_ids[0])[:1] if d}
    return sorted(names)


def rounds_ran(store: Store, run_id: str) -> list[int]:
    return sorted({e.round for e in store.read_records("evaluations", run_id=run_id) if e.round > 0})


def run_rows(store: Store, run_id: str, envs: Envs, union: set[str] | None = None) -> list[dict]:
    """One row per round that ran, with the same metric names (and values) as the run summary and compare."""
    evals = store.read_records("evaluations", run_id=run_id)
    env = envs[domain_of(store, run_id)]
    rows, seen = [], 0
    for r in rounds_ran(store, run_id):
        samples = verified_samples(store, run_id, r)
        this = [s for s in samples if s["round"] == r]
        row = {"round": r, "verified": len(samples), "verified_new": len(samples) - seen,
               "success_diagnostic": _rate(e.success for e in evals if e.round == r and e.task_set == "diagnostic"),
               "success_test": _rate(e.success for e in evals if e.round == r and e.task_set == "test"),
               "success_test_uniform": _rate(e.success for e in evals if e.round == r and e.task_set == "test_uniform"),
               **intrinsic(samples, env.pack, union), **overlap(store, env, run_id, r)}
        row.update(scored_metrics(row))  # the official-matched set's score, else the uniform one's (tasks/overlap.py)
        test = [e.success for e in evals if e.round == r and e.task_set == scored_set(row)]
        row.update(test_n=len(test), test_k=sum(test))
        lo, hi = wilson(sum(test), len(test))
        row["success_test_ci"] = f"{lo:.3f}-{hi:.3f}" if test else "-"
        row["share_num_write_3plus"] = _rate(s["observed"].get("num_write", ["0"])[0] in ("3-4", "5+") for s in this)
        seen = len(samples)
        rows.append(row)
    return rows


def arm_success(store: Store, run_ids: list[str]) -> list[dict]:
    """Success per (domain, arm) and round, pooled over the arm's runs (seeds), with 95% Wilson intervals
    over the evaluated tasks."""
    arms = {rid: _arm_of(store, rid) for rid in run_ids}
    pooled: dict[tuple[str, str, int, str], list[bool]] = defaultdict(list)
    runs: dict[tuple[str, str, int, str], set[str]] = defaultdict(set)
    for rid, (domain, arm) in arms.items():
        for e in store.read_records("evaluations", run_id=rid):
            if e.round > 0 and e.task_set in ("test", "test_uniform", "diagnostic"):
                pooled[(domain, arm, e.round, e.task_set)].append(e.success)
                runs[(domain, arm, e.round, e.task_set)].add(rid)
    out = []
    for key, xs in sorted(pooled.items()):
        domain, arm, r, task_set = key
        lo, hi = wilson(sum(xs), len(xs))
        out.append({"domain": domain, "arm": arm, "round": r, "task_set": task_set, "runs": len(runs[key]),
                    "n": len(xs), "success": _rate(xs), "ci_low": lo, "ci_high": hi})
    return out


def _arm_of(store: Store, run_id: str) -> tuple[str, str]:
    runs = store.read_records("runs", run_id=run_id)
    return (runs[0].domain, runs[0].arm) if runs else (default_domain(), "evosyn")


def scored_task_set(store: Store, run_id: str) -> str:
    """The task set a run's test score is of: ``test`` (official-matched) when any round evaluated it, else
    ``test_uniform`` (a domain with no official tasks; tasks/overlap.py)."""
    sets = {e["task_set"] for e in store.read_fields("evaluations", ["task_set"], run_id=run_id)}
    return "test" if "test" in sets else "test_uniform"


def slice_success(store: Store, run_id: str, task_set: str | None = None) -> list[dict]:
    """Success per (factor, value) slice and round, the value observed on each test task's gold solution
    (``task_set``: the run's scored set when None, ``scored_task_set``)."""
    task_set = task_set or scored_task_set(store, run_id)
    ran = set(rounds_ran(store, run_id))
    by: dict[tuple[str, str, int], list[bool]] = defaultdict(list)
    for e in store.read_records("evaluations", run_id=run_id):
        if e.round in ran and e.task_set == task_set:
            for f in SLICE_FACTORS:
                for v in e.observed.get(f, []):
                    by[(f, v, e.round)].append(e.success)
    return [{"factor": f, "value": v, "round": r, "n": len(xs), "success": _rate(xs)}
            for (f, v, r), xs in sorted(by.items())]


PASS_BINS = ("0", "(0, 0.5)", "[0.5, 1)", "1")  # pass rate of a task over its trials


def _bin(rate: float) -> str:
    return "0" if rate == 0 else "1" if rate == 1 else "(0, 0.5)" if rate < 0.5 else "[0.5, 1)"


def pass_rate_slices(store: Store, run_id: str) -> list[dict]:
    """Tasks per pass-rate bin (over the served learner's pass@k trials, ``served.trials``) per slice of the task's
    verified solution, and their mean pass rate: where the model's edge of capability lies."""
    trials: dict[str, list[bool]] = defaultdict(list)
    observed: dict[str, dict] = {}
    for e in store.read_records("evaluations", run_id=run_id):
        if e.task_set.startswith("trials-"):
            trials[e.task_id].append(e.success)
            observed[e.task_id] = e.observed
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for task_id, xs in trials.items():
        for f in SLICE_FACTORS:
            for v in observed[task_id].get(f, []):
                by[(f, v)].append(sum(xs) / len(xs))
    return [{"factor": f, "value": v, "tasks": len(rates), "mean pass rate": round(sum(rates) / len(rates), 3),
             **{b: sum(_bin(r) == b for r in rates) for b in PASS_BINS}} for (f, v), rates in sorted(by.items())]


def allocation(store: Store, run_id: str) -> list[dict]:
    """Blueprints the Designer asked for per factor value and round: a direction's blueprints are split
    evenly over the values it prefers or allows for the factor, and count as (any) when it names none."""
    ran = set(rounds_ran(store, run_id))
    dirs = [d for d in store.read_records("directions", run_id=run_id) if d.round in ran]
    factors = sorted({k for d in dirs for k in (*d.preferred_values, *d.allowed_values)})
    by: Counter = Counter()
    for d in dirs:
        for f in factors:
            vals = list(dict.fromkeys([*d.preferred_values.get(f, []), *d.allowed_values.get(f, [])])) or [ANY]
            for v in vals:
                by[(f, v, d.round)] += d.n_blueprints / len(vals)
    return [{"factor": f, "value": v, "round": r, "blueprints": int(n) if float(n).is_integer() else round(n, 2)}
            for (f, v, r), n in sorted(by.items())]


def probe_failures(store: Store, run_id: str) -> list[dict]:
    """Diagnostic failure rate per probe bucket and round (buckets with no task are left out)."""
    ran = set(rounds_ran(store, run_id))
    out = []
    for p in sorted(store.read_records("probes", run_id=run_id), key=lambda p: (p.probe, p.round)):
        if p.round not in ran:
            continue
        for i, b in enumerate(p.buckets):
            if b.count and b.failure_rate is not None:
                out.append({"probe": p.probe, "bucket": b.bucket, "order": i, "round": p.round, "n": b.count,
                            "failure_rate": b.failure_rate, "cmi_given_space": p.cmi_given_space})
    return out


def _diff(space) -> str:
    return "; ".join(f"{c.kind} {c.factor}" + (f" [{', '.join(c.values)}]" if c.values else "")
                     + (f" ({c.reason})" if c.reason else "") for c in space.diff) or "no change"


def trace(store: Store, run_id: str, envs: Envs) -> list[dict]:
    """The evolution trace (Tables 13/15): one row per transition between rounds that ran, plus the update
    made after the last round when there is one (proposed for a round that did not run)."""
    ran = rounds_ran(store, run_id)
    if not ran:
        return []
    spaces = {s.round: s for s in store.read_records("spaces", run_id=run_id)}
    probes = store.read_records("probes", run_id=run_id)
    refl = {x.round: x for x in store.read_records("reflections", run_id=run_id)}
    dirs = store.read_records("directions", run_id=run_id)
    rows = {row["round"]: row for row in run_rows(store, run_id, envs)}
    out = []
    for r in ran:
        before, after = spaces.get(r - 1), spaces.get(r)
        changed = before is not None and after is not None and after.version != before.version
        nxt = r + 1 in rows
        if not nxt and not changed:
            continue  # the last round left the space as it was: no transition to show
        top = max((p for p in probes if p.round == r), key=lambda p: p.cmi_given_space, default=None)
        focus: Counter = Counter()
        for d in dirs:
            if d.round == r + 1:
                for k, vs in {**d.allowed_values, **d.preferred_values}.items():
                    focus[f"{k}={'/'.join(vs)}"] += d.n_blueprints
        v_in, v_out = (before.version if before else "?"), (after.version if after else "?")
        out.append({
            "transition": f"{r} -> {r + 1}" if nxt else f"after {r}: proposed for round {r + 1} (not run)",
            "space": f"v{v_in} -> v{v_out}" + (f": {_diff(after)}" if changed else " (no change)"),
            "evidence": (f"{top.probe}: I(Y;d|O)={top.cmi_given_space:.3f}, residual {top.residual_cmi:.3f}"
                         if top else ""),
            "decision": refl[r].summary if r in refl else "(no Reflector in this arm)",
            "reviews": "; ".join(f"{d.dimension}: {d.decision.replace('_', ' ')} ({d.evidence or d.reason})"
                                 for d in refl[r].dimension_reviews) if r in refl else "",
            "designer_focus": ", ".join(f"{k} ({n})" for k, n in focus.most_common(3)) if nxt else "-",
            "change": (f"{SET_LABEL[scored_set(rows[r])]} {rows[r]['success_test_scored']:.3f} -> "
                       f"{rows[r + 1]['success_test_scored']:.3f}; "
                       f"3+ write share {rows[r]['share_num_write_3plus']:.2f} -> "
                       f"{rows[r + 1]['share_num_write_3plus']:.2f}"
                       if nxt else "-")})
    return out


def space_versions(store: Store, run_id: str) -> list[dict]:
    """The space each round that ran used, and the one it left."""
    spaces = {s.round: s for s in store.read_records("spaces", run_id=run_id)}
    return [{"round": r, "version_in": spaces[r - 1].version if r - 1 in spaces else None,
             "version_out": spaces[r].version if r in spaces else None,
             "factors": len(spaces[r].active) if r in spaces else None,
             "diff": _diff(spaces[r]) if r in spaces and r - 1 in spaces
             and spaces[r].version != spaces[r - 1].version else "no change"}
            for r in rounds_ran(store, run_id)]


def sample_trajectories(store: Store, run_id: str, envs: Envs, factor: str = "task_family", per_slice: int = 1,
                        max_slices: int = 6) -> list[dict]:
    """A few verified samples per slice of ``factor`` (its observed value), the latest round first."""
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id=run_id)}
    trajs = {t.trajectory_id: t for t in store.read_records("trajectories", run_id=run_id)}
    passed = {}
    for v in sorted(store.read_records("verdicts", run_id=run_id), key=lambda v: (v.round, v.attempt)):
        if v.passed and v.task_id in tasks and v.trajectory_id in trajs:
            passed[v.task_id] = v
    picked: dict[str, list] = {}
    for v in sorted(passed.values(), key=lambda v: (-v.round, v.task_id)):
        value = (v.observed.get(factor) or ["(none)"])[0]
        if value in picked or len(picked) < max_slices:
            if len(picked.setdefault(value, [])) < per_slice:
                picked[value].append(v)
    out = []
    for value in sorted(picked):
        for v in picked[value]:
            task = tasks[v.task_id]
            out.append({"factor": factor, "value": value, "task_id": v.task_id, "round": v.round,
                        "instruction": envs[task.domain].task_from_json(task.definition).scenario.reason_for_call,
                        "checks": [(c.name, c.passed, c.reason) for c in v.checks if not c.skipped],
                        "messages": trajs[v.trajectory_id].messages})
    return out


def chat_turns(messages: list[Message]) -> list[dict]:
    """A trajectory as chat turns: who speaks, the text, each tool call with its arguments, tool results."""
    return [{"role": m.role, "requestor": m.requestor, "content": m.content or "", "error": m.error,
             "calls": [(c.name, c.arguments) for c in m.tool_calls]} for m in messages if m.role != "system"]


def dedup_rows(store: Store, run_id: str, envs: Envs) -> list[dict]:
    """The dedup table's counts per round of the run, then per test set it is scored on (tasks/dedup.py)."""
    from evosyn.tasks.dedup import FLAGS, run_settings
    from evosyn.tasks.testset import KINDS, test_set_run_id

    domain, _, size = run_settings(store, run_id)
    sets = {test_set_run_id(envs[domain], n=size, kind=k): k for k in KINDS} if domain else {}
    rows = []
    for rid in [run_id, *sets]:
        by: dict[int, list] = defaultdict(list)
        for r in store.read_fields("dedup", ["round", "flagged", "flags"], run_id=rid):
            by[r["round"]].append(r)
        for rnd, rs in sorted(by.items()):
            rows.append({"checked_set": f"round {rnd}" if rid == run_id else f"test set {sets[rid]}",
                         "checked": len(rs), "flagged": sum(r["flagged"] for r in rs),
                         **{f: sum(f in r["flags"] for r in rs) for f in FLAGS}})
    return rows
