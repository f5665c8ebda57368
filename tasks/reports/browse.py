"""Reading the store for a person: records by id, an overview of its runs, a preview pass in memory.

``find`` looks an id up in every table that holds records of the pipeline
(blueprint -> task -> trajectory -> verdict -> SFT example -> evaluation) through
the DuckDB catalog, matching both a record's own id and the lineage ids it
carries, so a task id also brings its trajectories and verdicts. ``run_overview``
lists every run partition of the store: closed-loop runs (the ``runs`` table),
`evosyn synth` passes and fixed test sets. ``preview`` runs one synthesis pass
(tasks/synthesis.py) in a temporary store that is removed afterwards.
"""
from __future__ import annotations

import json
import math
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict

from evosyn.envs.base import Domain
from evosyn.storage.arrow import from_rows
from evosyn.storage.catalog import connect
from evosyn.storage.records import TABLES, Blueprint, Record, SynthTask, Trajectory, Verdict
from evosyn.storage.store import Store
from evosyn.tasks.overlap import ROW_FIELDS, SET_KIND, overlap_test_sets

# (kind, table, own id column), in pipeline order: what `show` prints first comes first
KINDS: tuple[tuple[str, str, str], ...] = (
    ("run", "runs", "run_id"),
    ("blueprint", "blueprints", "blueprint_id"),
    ("task", "tasks", "task_id"),
    ("trajectory", "trajectories", "trajectory_id"),
    ("verdict", "verdicts", "verdict_id"),
    ("example", "sft_examples", "example_id"),
    ("evaluation", "evaluations", "evaluation_id"),
)
# lineage ids a downstream record carries: an id of one of these matches the records that name it
LINEAGE = ("blueprint_id", "task_id", "trajectory_id")


@dataclass(frozen=True)
class Found:
    """One record an id matched, with its kind (a `KINDS` name) and how it matched."""

    kind: str
    table: str
    record: Record
    via: str  # the column that held the id (its own id column, or a lineage id)


def find(store: Store, record_id: str) -> list[Found]:
    """Every record whose own id, or (except runs) whose blueprint / task / trajectory id, is ``record_id``.

    In pipeline order (``KINDS``), then by run, round and attempt.
    """
    con = connect(store)
    found: list[Found] = []
    try:
        for kind, table, own in KINDS:
            model = TABLES[table]
            cols = [own] if kind == "run" else [own, *(c for c in LINEAGE if c != own and c in model.model_fields)]
            where = " OR ".join(f'"{c}" = ?' for c in cols)
            order = ", ".join(c for c in ("run_id", "round", "attempt") if c in model.model_fields)
            rows = con.sql(f'SELECT * FROM "{table}" WHERE {where} ORDER BY {order}',
                           params=[record_id] * len(cols)).to_arrow_table().to_pylist()
            for row in rows:
                via = next(c for c in cols if row.get(c) == record_id)
                found.extend(Found(kind=kind, table=table, record=r, via=via) for r in from_rows([row], model))
    finally:
        con.close()
    return found


# ---------------------------------------------------------------- runs
class RunRow(BaseModel):
    """One run partition of the store, as `evosyn runs` lists it."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    kind: str  # "run" (closed loop), "synth" (an `evosyn synth` pass) or "test set"
    domain: str = ""
    arm: str = ""
    seed: int | None = None
    rounds_done: int = 0
    rounds_asked: int | None = None
    status: str = ""
    verified: int = 0
    test_success: float | None = None  # the last evaluated round's test score (tasks/overlap.py: ``test_set``'s)
    test_round: int | None = None
    test_set: str = ""  # the set that scored it: "official-matched", or "uniform" (a domain with no official tasks)
    test_overlap: float | None = None  # share of the tasks it trained on that copy a test-set task (tasks/overlap.py)
    created_at: datetime | None = None


def _marker_info(store: Store, run_id: str) -> dict:
    path = store.marker_path("pass-inputs", run_id, 0)
    if not path.is_file():
        return {}
    info = json.loads(path.read_text())
    info["_created"] = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc).replace(microsecond=0)
    return info


def _done_markers(store: Store, run_id: str, stage: str, round_glob: str = "round=*") -> list:
    return list((store.markers_dir / f"run_id={run_id}").glob(f"{round_glob}/{stage}.*.done"))


def run_overview(store: Store) -> list[RunRow]:
    """Every run of the store (closed-loop runs, synth passes, test sets), oldest first."""
    from evosyn.tasks.testset import TEST_SET_STAGE

    con = connect(store)
    try:
        q = lambda sql: con.execute(sql).fetchall()  # noqa: E731
        runs = {r.run_id: r for r in from_rows(con.sql('SELECT * FROM "runs"').to_arrow_table().to_pylist(),
                                                TABLES["runs"])}
        domains = dict(q('SELECT run_id, any_value(domain) FROM "blueprints" GROUP BY run_id'))
        planned = dict(q('SELECT run_id, count(*) FROM "blueprints" GROUP BY run_id'))
        verified = dict(q('SELECT run_id, count(*) FROM "verdicts" WHERE passed GROUP BY run_id'))
        tests: dict[str, tuple] = {}  # run -> (round, rate, set) of its last round: official-matched, else uniform
        for rid, rnd, task_set, rate in q(
                'SELECT run_id, round, task_set, avg(success::int) FROM "evaluations" WHERE task_set IN '
                '(\'test\', \'test_uniform\') GROUP BY ALL ORDER BY run_id, round, task_set DESC'):
            tests[rid] = (rnd, rate, SET_KIND[task_set])  # per round "test" comes last, so it wins
        dedup: dict[str, list[dict]] = defaultdict(list)
        cols = ", ".join(ROW_FIELDS)
        for row in con.sql(f'SELECT run_id, {cols} FROM "dedup" WHERE split = \'train\'').to_arrow_table().to_pylist():
            dedup[row.pop("run_id")].append(row)
    finally:
        con.close()
    ids = sorted(set(store.runs(any_table=True)) | set(runs))
    out = []
    for rid in ids:
        rnd, rate, test_set = tests.get(rid, (None, None, ""))
        drop = rid in runs and bool(json.loads(runs[rid].config_json or "{}").get("dedup", {}).get("drop"))
        row = RunRow(run_id=rid, kind="run", verified=verified.get(rid, 0), test_round=rnd, test_set=test_set,
                     test_success=None if rate is None or math.isnan(rate) else float(rate),
                     test_overlap=overlap_test_sets(dedup.get(rid, []), drop), domain=domains.get(rid, ""))
        if rid in runs:
            run = runs[rid]
            row = row.model_copy(update=dict(
                domain=run.domain, arm=run.arm, seed=run.seed, rounds_asked=run.rounds, status=run.status,
                rounds_done=len({p.parent.name for p in _done_markers(store, rid, "reflect")}),
                created_at=run.created_at))
        else:  # a synthesis pass in round 0: finished once every chunk of its blueprints is verified
            info = _marker_info(store, rid)
            chunk = int(info.get("chunk_size") or 50)
            chunks = math.ceil(planned.get(rid, 0) / chunk)
            done = len(_done_markers(store, rid, "verify", "round=0"))
            finished = planned.get(rid, 0) > 0 and done >= chunks
            is_test = store.is_complete(TEST_SET_STAGE, rid, 0)
            row = row.model_copy(update=dict(
                kind="test set" if is_test else "synth",
                arm="" if is_test else info.get("arm", ""), seed=info.get("seed"), rounds_done=int(finished), rounds_asked=1,
                status="finished" if finished else "partial", created_at=info.get("_created")))
        out.append(row)
    never = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(out, key=lambda r: (r.created_at or never, r.run_id))


# ---------------------------------------------------------------- preview
@dataclass
class Sample:
    """One previewed blueprint and what became of it (a blueprint the generator could not realize has no task)."""

    blueprint: Blueprint
    task: SynthTask | None
    trajectory: Trajectory | None  # the last attempt: the kept one, or the last rejected
    verdict: Verdict | None


def preview(env: Domain, n: int, seed: int = 0, chunk_size: int = 50) -> list[Sample]:
    """``n`` blueprints of the initial space of ``env``'s domain through one embedded pass, in a store that is then
    removed."""
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass

    run_id = f"preview-{env.name}-s{seed}-n{n}"
    with tempfile.TemporaryDirectory(prefix="evosyn-preview-") as tmp:
        ctx = Ctx(Store(tmp), run_id, 0, seed, env)
        result = run_pass(ctx, load_initial_space(env.pack, run_id=run_id), ColdStart(), n, chunk_size=chunk_size)
    tasks = {t.blueprint_id: t for t in result.tasks}
    trajs = {t.trajectory_id: t for t in result.trajectories}
    last: dict[str, Verdict] = {}
    for v in result.verdicts:  # in write order: a blueprint's last verdict is its final attempt
        if not last.get(v.blueprint_id) or not last[v.blueprint_id].passed:
            last[v.blueprint_id] = v
    out = []
    for bp in result.blueprints:
        v = last.get(bp.blueprint_id)
        out.append(Sample(bp, tasks.get(bp.blueprint_id), trajs.get(v.trajectory_id) if v else None, v))
    return out
