"""Per-round metrics of a run, computed from the store (verified data of rounds <= r)."""
from __future__ import annotations

from envs.ontology import load_initial_space
from storage import metrics as M
from storage.store import Store


def verified_samples(store: Store, run_id: str, upto: int | None = None) -> list[dict]:
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id=run_id)}
    trajs = {t.trajectory_id: t for t in store.read_records("trajectories", run_id=run_id)}
    out = []
    for v in store.read_records("verdicts", run_id=run_id):
        if not v.passed or (upto is not None and v.round > upto) or v.task_id not in tasks:
            continue
        t = tasks[v.task_id]
        traj = trajs.get(v.trajectory_id)
        out.append({"round": v.round, "requested": t.requested, "observed": v.observed,
                    "pattern": v.observed.get("trajectory_pattern", ["none"])[0],
                    "sequence": tuple(c.name for m in (traj.messages if traj else []) for c in m.tool_calls)})
    return out


def intrinsic(samples: list[dict], domain: str, union: set[str] | None = None) -> dict[str, float]:
    reference = {f.key: f.values for f in load_initial_space(domain).factors}
    sels = [s["requested"] for s in samples]
    patterns = [s["pattern"] for s in samples]
    return {"factor_coverage": M.factor_coverage(sels, reference),
            "factor_balance": M.factor_balance(sels, reference),
            "interaction_coverage": M.interaction_coverage(sels, reference),
            "trajectory_diversity": M.trajectory_diversity(patterns, union or set(patterns)),
            "distinct_tool_sequences": float(M.distinct_sequences([s["sequence"] for s in samples]))}


def controllability(samples: list[dict], key: str) -> dict[str, float]:
    pairs = [(s["requested"][key][0], s["observed"][key][0]) for s in samples
             if s["requested"].get(key) and s["observed"].get(key)]
    return M.controllability(pairs)
