"""Per-round metrics of a run, computed from the store.

Intrinsic data metrics (App. B.1) use only verified examples (one per task) and
their observed factors, re-derived from the realized gold tool actions by the
verifier, against the fixed per-domain reference sets of envs/reference.py.
Trajectory diversity comes under two names: ``trajectory_diversity`` is normalized by
the run's own patterns so far (the run summary and MLflow value: fine for one run's
curve, not comparable across runs); ``trajectory_diversity_union``, returned when the
union of patterns of every compared run is passed (``pattern_union``), is comparable
across the runs of one comparison.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from evosyn.envs.reference import INTERACTION_TEMPLATES, reference_values
from evosyn.storage import metrics as M
from evosyn.storage.store import Store

if TYPE_CHECKING:
    from evosyn.envs.packs import DomainPack

GAIN_SPLIT = "diagnostic"


def verified_samples(store: Store, run_id: str, upto: int | None = None) -> list[dict]:
    """One sample per verified task of rounds <= upto (its last passing verdict)."""
    tasks = {t["task_id"]: t["requested"] for t in store.read_fields("tasks", ["task_id", "requested"], run_id=run_id)}
    last = {}
    verdicts = store.read_fields("verdicts", ["task_id", "round", "attempt", "passed", "observed", "trajectory_id"],
                                 run_id=run_id)
    for v in sorted(verdicts, key=lambda v: (v["round"], v["attempt"])):
        if v["passed"] and (upto is None or v["round"] <= upto) and v["task_id"] in tasks:
            last[v["task_id"]] = v
    wanted = {v["trajectory_id"] for v in last.values()}  # only these trajectories are parsed
    trajs = {t.trajectory_id: t for t in store.read_records("trajectories", run_id=run_id,
                                                             where=lambda row: row["trajectory_id"] in wanted)}
    out = []
    for tid in sorted(last, key=lambda t: (last[t]["round"], t)):
        v, requested = last[tid], tasks[tid]
        traj, observed = trajs.get(v["trajectory_id"]), v["observed"]
        out.append({"round": v["round"], "task_id": tid, "requested": requested, "observed": observed,
                    "pattern": observed.get("trajectory_pattern", ["none"])[0],
                    "sequence": tuple(c.name for m in (traj.messages if traj else []) for c in m.tool_calls)})
    return out


def pattern_union(store: Store, run_ids: list[str]) -> set[str]:
    """P_union: trajectory patterns of the verified data of every compared run, all rounds."""
    return {s["pattern"] for rid in run_ids for s in verified_samples(store, rid)}


def intrinsic(samples: list[dict], pack: DomainPack, union: set[str] | None = None) -> dict[str, float]:
    """``pack``: the samples' domain's, resolved by the caller (its reference sets)."""
    reference = reference_values(pack)
    observed = [s["observed"] for s in samples]
    patterns = [s["pattern"] for s in samples]
    return {"factor_coverage": M.factor_coverage(observed, reference),
            "factor_balance": M.factor_balance(observed, reference),
            "interaction_coverage": M.interaction_coverage(observed, reference, INTERACTION_TEMPLATES),
            "trajectory_diversity": M.trajectory_diversity(patterns, set(patterns)),
            "trajectory_patterns": float(len(set(patterns))),
            "distinct_tool_sequences": float(M.distinct_sequences([s["sequence"] for s in samples])),
            **({"trajectory_diversity_union": M.trajectory_diversity(patterns, union)} if union is not None else {})}


def ordinal_factors(pack: DomainPack) -> dict[str, list[str]]:
    """Factors whose values are ordered buckets, with their order: the write and read counts, and every
    property the domain's generator controls (its pack lists each one's buckets in order)."""
    return {"num_write": list(M.ORDINAL), "num_read": list(M.ORDINAL),
            **{k: list(vs) for k, vs in pack.controllable.items()}}


def first_rollouts(verdicts: list) -> dict[str, object]:
    """Blueprint id -> the verdict of its task's first rollout (attempt 0): the values the verifier observed before
    its factor gate or a repair decided anything. Rejections (no task) have none."""
    return {v.blueprint_id: v for v in verdicts if v.task_id and v.attempt == 0}


def requested_realized(blueprints: list, first: dict, key: str) -> tuple[list[tuple[str, str]], int]:
    """(requested, realized) of every blueprint that requested a value of ``key`` and was rolled out, and the
    number of requests never realized (no task, no rollout, or no observed value)."""
    pairs, unrealized = [], 0
    for bp in blueprints:
        want = bp.selected_dimensions.get(key)
        if not want:
            continue
        got = (first[bp.blueprint_id].observed.get(key) or []) if bp.blueprint_id in first else []
        if got:
            pairs.append((want[0], got[0]))
        else:
            unrealized += 1
    return pairs, unrealized


def _requests(store: Store, run_id: str, round: int) -> tuple[list, dict, list]:
    """The round's blueprints, ``first_rollouts`` of its verdicts, and the directions of its planning refusals
    (one per refused plan)."""
    verdicts = store.read_records("verdicts", run_id=run_id, round=round)
    directions = {d.direction_id: d for d in store.read_records("directions", run_id=run_id, round=round)}
    refused = [directions[v.direction_id] for v in verdicts
               if not v.task_id and (v.blueprint_id or "").startswith("unplanned-") and v.direction_id in directions]
    return store.read_records("blueprints", run_id=run_id, round=round), first_rollouts(verdicts), refused


def controllability(store: Store, run_id: str, round: int, key: str, order: list[str] | None = None,
                    requests: tuple[list, dict, list] | None = None) -> dict[str, float]:
    """B.7 before the verifier's factor gate, over every blueprint of the round that requested a value of ``key``.

    Realized: the value the verifier re-derived from the task's first rollout (attempt 0, before the factor
    gate or a repair decides anything). A request that was never realized counts as a miss of the exact
    match: a blueprint the generator could not build (or whose rollout failed), and a plan the planner
    refused for a direction that allowed one value of ``key`` only. Spearman: requested vs realized bucket
    index over the rolled-out tasks. ``n_requested`` / ``n_realized`` count both. ``requests``: the round's
    ``_requests`` when the caller has read them.
    """
    blueprints, first, refused = requests or _requests(store, run_id, round)
    pairs, unrealized = requested_realized(blueprints, first, key)
    unrealized += sum(len(d.allowed_values.get(key, [])) == 1 for d in refused)
    return M.controllability(pairs, order or list(M.ORDINAL), unrealized)


def round_controllability(store: Store, run_id: str, pack: DomainPack, round: int) -> dict[str, dict[str, float]]:
    """``controllability`` of every ordinal factor some blueprint (or single-valued direction) of the round
    requested: factor -> exact, spearman, n_requested, n_realized."""
    requests, out = _requests(store, run_id, round), {}
    for key, order in ordinal_factors(pack).items():
        c = controllability(store, run_id, round, key, order, requests)
        if c["n_requested"]:
            out[key] = {k: float(c[k]) for k in ("exact", "spearman", "n_requested", "n_realized")}
    return out


def _evals(store: Store, run_id: str, round: int, task_set: str, task_ids: set[str] | None = None):
    rows = store.read_fields("evaluations", ["task_set", "task_id", "observed", "success"], run_id=run_id, round=round)
    return [(e["observed"], e["success"]) for e in rows
            if e["task_set"] == task_set and (task_ids is None or e["task_id"] in task_ids)]


def transition(store: Store, run_id: str, pack: DomainPack, round: int, task_set: str = GAIN_SPLIT,
               min_n: int = 3, samples: list[dict] | None = None) -> dict[str, float]:
    """B.5 / B.8 for round-1 -> round over the (factor, value) slices of the reference sets.

    Success is measured on the same tasks before and after: the tasks of ``task_set``
    that round-1 evaluated (the diagnostic set only grows, so they are evaluated
    again in ``round``); shares are of each round's own verified data. ``samples``: the run's
    ``verified_samples`` up to ``round`` when the caller has them already (reading them decodes every
    trajectory of the run).
    """
    reference = reference_values(pack)
    before = _evals(store, run_id, round - 1, task_set)
    if not before:
        return {}
    ids = {e.task_id for e in store.read_records("evaluations", run_id=run_id, round=round - 1)
           if e.task_set == task_set}
    after = _evals(store, run_id, round, task_set, ids)
    samples = verified_samples(store, run_id, round) if samples is None else samples
    share = {r: M.slice_shares([s["observed"] for s in samples if s["round"] == r], reference)
             for r in (round - 1, round)}
    return M.capability_transition(share[round - 1], share[round], M.slice_success(before, reference, min_n),
                                   M.slice_success(after, reference, min_n),
                                   overall_before=sum(ok for _, ok in before) / len(before))


def _success(store: Store, run_id: str, round: int, task_set: str = "test") -> float | None:
    evs = _evals(store, run_id, round, task_set)
    return sum(ok for _, ok in evs) / len(evs) if evs else None


def added_examples(store: Store, run_id: str, round: int) -> int:
    return sum(e["split"] == "train" for e in store.read_fields("sft_examples", ["split"], run_id=run_id, round=round))


def gain_per_1k(store: Store, run_id: str, round: int, task_set: str = "test") -> float:
    """B.12: test success change from round-1 (round 0 = the base learner, if evaluated) per 1K
    verified training examples added in ``round``. A run with no ``test`` evaluation in ``round`` (a domain with
    no official tasks has no official-matched set) is measured on the uniform set, its test set."""
    if task_set == "test" and _success(store, run_id, round, task_set) is None:
        task_set = "test_uniform"
    before, after = _success(store, run_id, round - 1, task_set), _success(store, run_id, round, task_set)
    if before is None or after is None:
        return float("nan")
    return M.gain_per_1k(before, after, added_examples(store, run_id, round))


def round_metrics(store: Store, run_id: str, pack: DomainPack, round: int,
                  samples: list[dict] | None = None) -> dict[str, float]:
    """The B.5 / B.7 / B.8 / B.12 metrics of one round, for MLflow and the summary (NaN when undefined);
    ``samples`` as for ``transition``."""
    out = {f"{k}": v for k, v in transition(store, run_id, pack, round, samples=samples).items()}
    out["success_gain_per_1k"] = gain_per_1k(store, run_id, round)
    out["added_train_examples"] = float(added_examples(store, run_id, round))
    for key, c in round_controllability(store, run_id, pack, round).items():
        out.update({f"controllability.{key}.{k}": v for k, v in c.items()})
    return out
