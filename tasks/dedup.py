"""Deduplication and decontamination: the stage after verify, and the same check over any run (`evosyn dedup`).

Each verified task of a round (one with an SFT example, train or diagnostic) is checked, in (round, task id) order,
against three references, by the two tests of ``evosyn.tasks.dedup_index``:

- ``duplicate``: an earlier verified task of the same run (an earlier round, or this round's before it);
- ``official`` / ``official_test``: every official task of the domain (all splits); a match in the official
  test split is flagged ``official_test``, apart from the others, and wins when both match;
- ``test_set``: the tasks of the domain's fixed test sets (official-matched and uniform) that the run is scored on.

The test sets' own tasks are checked too, once per set and parameters, in the set's own run partition: against
the official tasks and the set's earlier tasks. Rows go to the ``dedup`` table as chunk ``dedup`` of their
partition, and the completion marker names the parameters: a rerun with the same ones reads them back (a resume
is row-identical), other ones (or a test set built since) recompute the chunk. Flagging changes nothing else; ``dedup.drop`` in the run config
also leaves the flagged tasks out of training (``training_examples``).
"""
from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import prefect

from evosyn.envs.base import Domain
from evosyn.config import DedupConfig, RunConfig
from evosyn.storage.faults import kill_point
from evosyn.storage.locks import store_lock
from evosyn.storage.records import Contract, DedupCheck, SFTExample, SynthTask
from evosyn.storage.store import Store
from evosyn.tasks import timing
from evosyn.tasks.datasets import examples_upto
from evosyn.tasks.dedup_index import Index, Match, Params, Signature, signatures
from evosyn.tasks.engine import STAGE_TASK, emitter
from evosyn.tasks.progress import Emit
from evosyn.tasks.stages import Ctx, emit_event
from evosyn.tasks.testset import KINDS, is_built, test_cases, test_set_run_id

STAGE = CHUNK = TABLE = "dedup"
FLAGS = ("duplicate", "official", "official_test", "test_set")
OFFICIAL_TEST_SPLIT = "test"


def params_of(cfg: DedupConfig) -> Params:
    return Params(threshold=cfg.threshold, num_perm=cfg.num_perm, shingle=cfg.shingle)


class DedupCounts(Contract):
    """How many checked tasks were flagged, in all and per flag (a task may carry several flags)."""

    checked: int = 0
    flagged: int = 0
    duplicate: int = 0
    official: int = 0
    official_test: int = 0
    test_set: int = 0

    @classmethod
    def of(cls, rows: list[DedupCheck]) -> DedupCounts:
        return cls(checked=len(rows), flagged=sum(r.flagged for r in rows),
                   **{f: sum(f in r.flags for r in rows) for f in FLAGS})

    def line(self) -> str:
        """``200 checked, 3 flagged (duplicate 2, official_test 1)``."""
        per = ", ".join(f"{f} {getattr(self, f)}" for f in FLAGS if getattr(self, f))
        return f"{self.checked} checked, {self.flagged} flagged" + (f" ({per})" if per else "")

    def metrics(self, prefix: str = "dedup_") -> dict[str, float]:
        return {f"{prefix}{k}": float(v) for k, v in self.model_dump().items()}


def _writes(domain: Domain) -> Callable[[dict], bool]:
    def writes(action: dict) -> bool:
        spec = domain.tool(action["name"], action.get("requestor") or "assistant")
        return spec is not None and spec.kind == "write"
    return writes


@functools.lru_cache(maxsize=8)
def official_index(domain: Domain, params: Params) -> tuple[Index, dict[str, tuple[str, ...]]]:
    """Every official task of ``domain`` indexed, and the splits each is in (built once per process)."""
    splits: dict[str, list[str]] = {}
    for name in sorted(domain.splits()):
        for task in domain.tasks(name):
            splits.setdefault(task.id, []).append(name)
    index = Index(params)
    index.extend(signatures([(t.id, t) for t in domain.tasks(None)], params, _writes(domain)))
    return index, {k: tuple(v) for k, v in splits.items()}


def _row(task: SynthTask, split: str, sig: Signature, dups: list[Match], earlier_round: dict[str, int],
         offs: list[Match], official_splits: dict[str, tuple[str, ...]], tests: list[Match],
         owner: dict[str, str]) -> DedupCheck:
    flags, fields = [], {}
    if dups:
        flags.append("duplicate")
        fields.update(duplicate_of=dups[0].key, duplicate_round=earlier_round[dups[0].key],
                      duplicate_jaccard=dups[0].jaccard, duplicate_by=list(dups[0].by))
    in_test = [m for m in offs if OFFICIAL_TEST_SPLIT in official_splits.get(m.key, ())]
    if offs:
        off = (in_test or offs)[0]
        flags.append("official_test" if in_test else "official")
        fields.update(official_task=off.key, official_splits=list(official_splits.get(off.key, ())),
                      official_jaccard=off.jaccard, official_by=list(off.by))
    if tests:
        flags.append("test_set")
        fields.update(test_set_task=tests[0].key, test_set=owner[tests[0].key], test_set_jaccard=tests[0].jaccard,
                      test_set_by=list(tests[0].by))
    return DedupCheck(run_id=task.run_id, round=task.round, space_version=task.space_version,
                      direction_id=task.direction_id, blueprint_id=task.blueprint_id, task_id=task.task_id,
                      source=task.source, split=split, actions_signature=sig.actions, actions_write=sig.writes,
                      flags=flags, flagged=bool(flags), **fields)


@dataclass
class SetIndex:
    """The built test sets of a domain and size: their own rows, their tasks indexed, each task's set, the sets."""

    rows: list[DedupCheck]
    index: Index
    owner: dict[str, str]  # task id -> its set's run id
    ids: list[str]  # the sets' run ids

    def key(self, params: Params) -> str:
        """What a round's check was made against: the parameters, and the sets (a set built later: checked again)."""
        return params.key() + (f";sets={','.join(self.ids)}" if self.ids else "")


def check(checked: list[tuple[SynthTask, str]], earlier: list[SynthTask], domain: Domain, params: Params,
          test_sets: SetIndex | None = None) -> list[DedupCheck]:
    """A row per (task, split) of ``checked``, in order; each compared with ``earlier``, the tasks of
    ``checked`` before it, the official tasks and (when given) the test sets' tasks."""
    writes = _writes(domain)
    index, rounds = Index(params), {t.task_id: t.round for t in earlier}
    index.extend(signatures([(t.task_id, domain.task_from_json(t.definition)) for t in earlier], params, writes))
    official, official_splits = official_index(domain, params)
    tests, owner = (test_sets.index, test_sets.owner) if test_sets is not None else (None, {})
    rows = []
    sigs = signatures([(t.task_id, domain.task_from_json(t.definition)) for t, _ in checked], params, writes)
    for (task, split), sig in zip(checked, sigs):
        rows.append(_row(task, split, sig, index.matches(sig), rounds, official.matches(sig), official_splits,
                         tests.matches(sig) if tests is not None else [], owner))
        index.add(sig)
        rounds.setdefault(task.task_id, task.round)
    return rows


# ---------------------------------------------------------------- over the store
def _checked_with(store: Store, run_id: str, round: int, key: str) -> bool:
    """Chunk ``dedup`` of the partition was written with ``key`` (its parameters and references; its marker says
    which)."""
    path = store.marker_path(STAGE, run_id, round, CHUNK)
    return path.is_file() and json.loads(path.read_text()).get("params") == key


def _write(store: Store, run_id: str, round: int, rows: list[DedupCheck], key: str) -> None:
    if rows:
        store.write(rows, CHUNK)
    else:
        store.remove_chunk(TABLE, run_id, round, CHUNK)
    kill_point(STAGE, round)
    store.mark_complete(STAGE, run_id, round, CHUNK, params=key)


def test_sets_checked(store: Store, domain: Domain, size: int, params: Params) -> SetIndex:
    """The domain's built test sets of ``size`` tasks: their rows (checked now if they were not with ``params``),
    and their tasks indexed for the synthesized ones. A set not built yet is left out."""
    rows, index, owner, ids = [], Index(params), {}, []
    for kind in KINDS:
        if not is_built(store, domain, size, kind):
            continue
        run_id = test_set_run_id(domain, n=size, kind=kind)
        ids.append(run_id)
        members = [c.task for c in test_cases(store, domain, n=size, kind=kind)]
        with store_lock(store.location, f"dedup-{run_id}"):  # runs sharing the set: one checks it, the others read it
            if _checked_with(store, run_id, 0, params.key()):
                out = store.read_chunk(TABLE, run_id, 0, CHUNK)
            else:
                out = check([(t, "") for t in members], [], domain, params)
                _write(store, run_id, 0, out, params.key())
        rows += out
        index.extend(signatures([(t.task_id, domain.task_from_json(t.definition)) for t in members], params,
                                _writes(domain)))
        owner.update({t.task_id: run_id for t in members if t.task_id not in owner})
    return SetIndex(rows, index, owner, sorted(ids))


def verified(store: Store, run_id: str, upto: int) -> dict[int, list[tuple[SynthTask, str]]]:
    """round -> (task, SFT split) of every task with an SFT example in rounds <= ``upto``, by task id."""
    splits = {(e["round"], e["task_id"]): e["split"]
              for e in store.read_fields("sft_examples", ["task_id", "round", "split"], run_id=run_id)
              if e["round"] <= upto}
    wanted = {t for _, t in splits}
    tasks = {(t.round, t.task_id): t for t in store.read_records("tasks", run_id=run_id,
                                                                  where=lambda row: row["task_id"] in wanted)}
    out: dict[int, list[tuple[SynthTask, str]]] = {}
    for key in sorted(splits):
        if key in tasks:
            out.setdefault(key[0], []).append((tasks[key], splits[key]))
    return out


def check_round(store: Store, domain: Domain, run_id: str, round: int, params: Params, test_size: int,
                sets: SetIndex | None = None) -> tuple[list[DedupCheck], list[DedupCheck]]:
    """(the round's rows, the test sets' rows): computed unless stored with ``params`` against the same test
    sets, then stored. ``sets``: ``test_sets_checked``'s answer when the caller has it (a check of several
    rounds)."""
    sets = sets if sets is not None else test_sets_checked(store, domain, test_size, params)
    if _checked_with(store, run_id, round, sets.key(params)):
        return store.read_chunk(TABLE, run_id, round, CHUNK), sets.rows
    by_round = verified(store, run_id, round)
    earlier = [t for r, pairs in by_round.items() if r < round for t, _ in pairs]
    rows = check(by_round.get(round, []), earlier, domain, params, sets)
    _write(store, run_id, round, rows, sets.key(params))
    return rows, sets.rows


class RunCheck(Contract):
    """`evosyn dedup`: what one run's check found, per round, and in the test sets it is scored on."""

    run_id: str
    domain: str
    params: str
    rounds: dict[int, DedupCounts]
    test_sets: DedupCounts
    test_set_ids: list[str]


def run_settings(store: Store, run_id: str) -> tuple[str | None, DedupConfig, int]:
    """(domain, dedup config, test size) of a run: its stored config, or for a synthesis pass (no run row) its
    tasks' domain and the defaults."""
    runs = store.read_records("runs", run_id=run_id, round=0)
    if runs:
        cfg = RunConfig.model_validate_json(runs[0].config_json)
        return runs[0].domain, cfg.dedup, cfg.test_size
    first = store.read_fields("tasks", ["domain"], run_id=run_id)[:1]
    return (first[0]["domain"] if first else None), DedupConfig(), RunConfig().test_size


def check_run(store: Store, domain: Domain, run_id: str, cfg: DedupConfig, test_size: int) -> RunCheck:
    """Every round of ``run_id`` with verified tasks, and the test sets of ``test_size`` built in the store."""
    params = params_of(cfg)
    sets = test_sets_checked(store, domain, test_size, params)
    rounds = sorted({e["round"] for e in store.read_fields("sft_examples", ["round"], run_id=run_id)})
    counts = {r: DedupCounts.of(check_round(store, domain, run_id, r, params, test_size, sets)[0]) for r in rounds}
    return RunCheck(run_id=run_id, domain=domain.name, params=params.key(), rounds=counts,
                    test_sets=DedupCounts.of(sets.rows), test_set_ids=sets.ids)


def dropped(store: Store, run_id: str, upto: int) -> frozenset[str]:
    """The tasks of rounds <= ``upto`` flagged by their round's check (``dedup.drop`` trains without them)."""
    return frozenset(r["task_id"] for r in store.read_fields(TABLE, ["task_id", "round", "flagged"], run_id=run_id)
                     if r["flagged"] and r["round"] <= upto)


def drops(store: Store, run_id: str) -> bool:
    """Whether the run's stored config says ``dedup.drop`` (a synthesis pass, without a run row, does not)."""
    runs = store.read_records("runs", run_id=run_id, round=0)
    return bool(runs) and bool(json.loads(runs[0].config_json or "{}").get("dedup", {}).get("drop"))


def training_examples(store: Store, run_id: str, round: int) -> list[SFTExample]:
    """What rounds <= ``round`` train on: the train split, less the flagged tasks when the run drops them.

    Read from the run's own config, so every trainer of the run (the round, `evosyn train`, the SFT deployment,
    the LLaMA-Factory export) leaves out the same tasks."""
    drop = dropped(store, run_id, round) if drops(store, run_id) else frozenset()
    return examples_upto(store, run_id, round, "train", drop=drop)


def dedup(ctx: Ctx, test_size: int, emit: Emit | None = None) -> tuple[DedupCounts, DedupCounts]:
    """The stage: the round's verified tasks (and the test sets, once); (the round's counts, the test sets')."""
    t0 = time.monotonic()
    rows, set_rows = check_round(ctx.store, ctx.env, ctx.run_id, ctx.round, params_of(ctx.dedup), test_size)
    counts, sets = DedupCounts.of(rows), DedupCounts.of(set_rows)
    emit_event(emit, ctx, STAGE, len(rows), len(rows), total=len(rows), since=t0,
               detail=counts.line() + (f"; test sets {sets.line()}" if set_rows else "")
               + ("; flagged tasks left out of training" if ctx.dedup.drop else ""))
    return counts, sets


@prefect.task(name="dedup", **STAGE_TASK)
def dedup_task(ctx: Ctx, test_size: int) -> tuple[DedupCounts, DedupCounts]:
    with timing.span("fn", "dedup", ctx.round):
        return dedup(ctx, test_size, emit=emitter())
