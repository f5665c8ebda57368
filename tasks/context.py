"""A pass's context: where its stages read and write (store, run, round) and how its roles are built. Every stage
(tasks/stages.py) and every pass (the round, `evosyn synth`, the test sets) is handed one; `evosyn.tasks.stages` re-exports it."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from evosyn.agents.roles import Roles, build_roles, flush_calls, llm_roles
from evosyn.envs.base import Domain
from evosyn.envs.packs import DomainPack
from evosyn.storage.chunks import verify
from evosyn.config import DedupConfig, RoleConfig, RunConfig
from evosyn.storage.faults import kill_point
from evosyn.storage.store import Store

DIAGNOSTIC_FRACTION = 0.2
log = logging.getLogger("evosyn.stages")
_BEGAN: dict[tuple, int] = {}  # (root, run, round, stage, chunk) -> when its computation began (Ctx.done / mark)


@dataclass(frozen=True)
class Ctx:
    """Where a pass's stages read and write (store, run, round) and how its roles are built.

    ``llm_roles``: role -> the config of each LLM-backed role (validated once, by
    ``evosyn.agents.roles.check_roles``); every other role is embedded.
    ``diagnostic_fraction``: the held-out share of each verified chunk's SFT
    examples; None writes no examples (the test set is no training data).
    ``source``: the ``source`` of every generated task (None keeps the generator's).
    ``fault_points``: the ``evosyn.storage.faults`` point each stage's crash point is,
    for a pass that has its own points (the test set has one, ``testset``, after
    its tasks); a stage it leaves out has none. None: each stage's own name.
    """

    store: Store
    run_id: str
    round: int
    seed: int
    # the pass's environment, resolved by the caller (the compile step, a test set's builder); stages and roles
    # are handed the object (and its ``pack``), never the name to look up again. A process task runner
    # (`task_runner: dask`) pickles it by name: the worker's registry builds it there (``Domain.__reduce__``)
    env: Domain = field(compare=False, repr=False)
    llm_roles: dict[str, RoleConfig] = field(default_factory=dict)
    diagnostic_fraction: float | None = DIAGNOSTIC_FRACTION
    source: Literal["synthesized", "official", "test_set"] | None = None
    fault_points: dict[str, str] | None = None
    prior: dict[str, dict[str, float]] = field(default_factory=dict)  # RunConfig.prior.suppress
    prior_writes: dict[int, float] | None = None  # RunConfig.prior.writes
    probe_size: int = 0  # RunConfig.probe_size
    dedup: DedupConfig = field(default_factory=DedupConfig)  # RunConfig.dedup (tasks/dedup.py; `drop` in training)

    @classmethod
    def for_run(cls, cfg: RunConfig, run_id: str, round: int, env: Domain) -> "Ctx":
        """A round of the run ``cfg`` (its LLM roles are those ``check_roles`` accepted before the run began);
        ``env``: its environment, as the compile step resolved it (``evosyn.flows.compile``)."""
        return cls(Store(cfg.store_location()), run_id, round, cfg.seed, env,
                   llm_roles=llm_roles(cfg), prior=cfg.prior.suppress, prior_writes=cfg.prior.writes,
                   probe_size=cfg.probe_size, dedup=cfg.dedup)

    @property
    def domain(self) -> str:
        """The environment's name (what the rows record)."""
        return self.env.name

    @property
    def pack(self) -> DomainPack:
        return self.env.pack

    def roles(self, **kw: Any) -> Roles:
        return build_roles(self.llm_roles, self.env, cache_dir=self.store.root / "llm_cache", prior=self.prior,
                           prior_writes=self.prior_writes, **kw)

    def flush(self, roles: Roles, chunk: str) -> None:
        flush_calls(roles, self.store, run_id=self.run_id, round=self.round, chunk=chunk)

    def crash_point(self, stage: str) -> None:
        """Where ``stage`` dies under ``EVOSYN_FAULT_KILL_AT`` (storage/faults.py): after some output, before its mark."""
        point = stage if self.fault_points is None else self.fault_points.get(stage)
        if point:
            kill_point(point, self.round)

    def done(self, stage: str, chunk: str) -> bool:
        """Whether ``stage`` wrote all of chunk ``chunk`` (its marker, written after its last table) and its files
        are still what the marker records (storage/chunks.py): a chunk file missing, truncated or changed since
        makes the stage recompute the chunk, row-identically."""
        marker = self.store.marker_path(stage, self.run_id, self.round, chunk)
        problems = verify(self.store, marker) if marker.is_file() else None
        for p in problems or ():
            log.warning("%s; recomputing chunk %s of %s", p.line(), chunk, stage)
        if problems == []:
            return True
        _BEGAN[self._key(stage, chunk)] = time.time_ns()  # the stage computes it now: its files are those since
        return False

    def mark(self, stage: str, chunk: str) -> None:
        since = _BEGAN.pop(self._key(stage, chunk), None)
        self.store.mark_complete(stage, self.run_id, self.round, chunk, since_ns=since)

    def _key(self, stage: str, chunk: str) -> tuple:
        return self.store.location, self.run_id, self.round, stage, chunk

    def read(self, table: str, chunk: str) -> list:
        return self.store.read_chunk(table, self.run_id, self.round, chunk)

    def put(self, table: str, records: list, chunk: str) -> None:
        """Chunk ``chunk`` of ``table`` is exactly ``records``: a redone stage that now has none of them
        (a plan rejected before the crash, accepted on the rerun) leaves no stale chunk behind."""
        if records:
            self.store.write(records, chunk)
        else:
            self.store.remove_chunk(table, self.run_id, self.round, chunk)
