"""A sweep fanned out over Prefect workers: each (domain, arm, seed) one flow run of the `evosyn-run` deployment.

`evosyn sweep --submit deployment` (or ``submit: deployment`` in the config's ``sweep`` section) creates the
flow runs through Prefect's ``run_deployment`` (without waiting), so every process worker polling the
deployment's work pool takes cells as it is free; the sweep then waits for them all and reports. Each cell
carries its whole run config, with the store root made absolute (a local folder) or kept as given (a URL),
so every worker writes to the one store the sweep reads; the run id is the one ``evosyn run`` computes, so a
sweep over workers writes the same rows as the same sweep run in one process.

A cell whose run is already finished in the store is not submitted again: after a worker died mid-run (its
flow run then stays RUNNING in Prefect, as Prefect cannot tell), running the same sweep again submits only
what is unfinished, and whichever worker takes a cell resumes its run from the store (or ``evosyn run
--resume RUN_ID`` finishes it here); the lost flow run is then marked crashed (``crash_superseded``). A cell
whose run is still held by a live process fails at once with "already running" and leaves that process be.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from evosyn.flows.run_id import run_id_for
from evosyn.config import RunConfig
from evosyn.storage.store import Store

DEFAULT_DEPLOYMENT = "evosyn-run/evosyn-run"
SUBMIT_MODES = ("inline", "deployment")
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
STORED = "FINISHED"  # the state a cell reports when its run was finished in the store before this sweep


class SweepError(RuntimeError):
    """The sweep cannot submit (no such deployment, no server) or did not finish in time: one line."""


@dataclass
class Cell:
    """One (domain, arm, seed) of a sweep over workers, and the flow run that computes it."""

    cfg: RunConfig
    run_id: str
    flow_run_id: UUID | None = None
    flow_run_name: str = ""
    state: str = "SCHEDULED"
    message: str = ""

    @property
    def done(self) -> bool:
        return self.state in FINAL or self.state == STORED

    @property
    def ok(self) -> bool:
        return self.state in ("COMPLETED", STORED)


def shared_root(cfg: RunConfig) -> str:
    """The store root every worker must write to: a URL (``s3://...``) as given, a local folder made absolute
    (a worker's working directory is the deployment's, not the sweep's)."""
    given = cfg.store.root or os.environ.get("EVOSYN_HOME") or ""  # where store_root() looks, in its order
    if "://" in given:
        return given
    return str(Path(cfg.store_root()).expanduser().resolve())


def _finished(cfg: RunConfig, run_id: str) -> bool:
    """Whether ``run_id`` is finished in the cell's store: its location (an ``s3://`` prefix, or the folder),
    never this machine's local folder of an S3 store."""
    try:
        rows = Store(cfg.store_location(), create=False).read_records("runs", run_id=run_id, round=0)
    except FileNotFoundError:  # no store, or no row of this run yet: the run is submitted
        return False
    return bool(rows) and rows[-1].status == "finished"


def check_deployment(name: str) -> str:
    """The work pool of deployment ``name``; a one-line error when the server has no such deployment."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            dep = client.read_deployment_by_name(name)
    except ObjectNotFound:
        raise SweepError(f"deployment {name} is not on the Prefect server (run `evosyn up` and `evosyn deploy`, "
                         "then point PREFECT_API_URL at that server)") from None
    return dep.work_pool_name or ""


def run_tag(run_id: str) -> str:
    """The tag of every flow run a sweep submits for ``run_id`` (how a later sweep finds the earlier ones)."""
    return f"evosyn-run-id:{run_id}"


def submit_cells(cfgs: list[RunConfig], deployment: str = DEFAULT_DEPLOYMENT,
                 say: Callable[[str], None] = lambda s: None) -> list[Cell]:
    """One flow run of ``deployment`` per config not finished in the store yet; returns every cell."""
    from prefect.deployments import run_deployment

    cells = []
    for cfg in cfgs:
        cfg = cfg.model_copy(update={"store": cfg.store.model_copy(update={"root": shared_root(cfg)})})
        cell = Cell(cfg, run_id_for(cfg))
        cells.append(cell)
        if _finished(cfg, cell.run_id):
            cell.state, cell.message = STORED, "finished in the store before this sweep: not submitted"
            say(f"sweep: {cell.run_id} is finished in the store; not submitted")
            continue
        # timeout=0: create the flow run and return; the workers of the deployment's pool take them in turn
        run = run_deployment(deployment, parameters={"cfg": cfg.model_dump(mode="json"), "run_id": cell.run_id},
                             timeout=0, tags=["evosyn-sweep", run_tag(cell.run_id)])
        cell.flow_run_id, cell.flow_run_name = run.id, run.name
        say(f"sweep: submitted {cell.run_id} as flow run {run.name} of {deployment}")
    return cells


def wait_cells(cells: list[Cell], timeout: float | None = None, poll: float = 2.0,
               say: Callable[[str], None] = lambda s: None) -> list[Cell]:
    """Poll the cells' flow runs (one request per poll) until every one is final; ``SweepError`` after
    ``timeout`` seconds with those still open named (their flow runs go on)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    open_ = {c.flow_run_id: c for c in cells if not c.done}
    deadline = None if timeout is None else time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while open_:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(open_))),
                                         limit=len(open_))
            for run in runs:
                cell = open_[run.id]
                state = run.state.type.value if run.state else "SCHEDULED"
                if state != cell.state:
                    say(f"sweep: {cell.run_id} ({run.name}): {state.lower()}")
                cell.state, cell.message = state, (run.state.message or "") if run.state else ""
                if cell.done:
                    del open_[run.id]
            if not open_:
                break
            if deadline is not None and time.monotonic() > deadline:
                left = ", ".join(f"{c.run_id} ({c.state.lower()})" for c in open_.values())
                raise SweepError(f"sweep: {len(open_)} run(s) not finished after {timeout:.0f}s: {left}; their "
                                 "flow runs go on (run the sweep again later: finished runs are not resubmitted)")
            time.sleep(poll)
    return cells


def crash_superseded(cells: list[Cell], say: Callable[[str], None] = lambda s: None) -> list[str]:
    """Mark CRASHED the earlier flow runs still RUNNING for a run that a cell of this sweep has now finished.

    A worker that died leaves its flow run RUNNING in Prefect for good. Once a later flow run of the same run id
    completed, the earlier one cannot still be computing it (the run's lock would have refused the later one),
    so it is marked crashed, naming the flow run that finished the run. Returns the names marked."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType,
                                                FlowRunFilterTags)
    from prefect.states import Crashed

    marked = []
    with get_client(sync_client=True) as client:
        for cell in cells:
            if cell.state != "COMPLETED":
                continue
            stale = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                tags=FlowRunFilterTags(all_=[run_tag(cell.run_id)]),
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=["RUNNING"]))))
            for run in stale:
                if run.id == cell.flow_run_id:
                    continue
                client.set_flow_run_state(run.id, Crashed(message=f"its process was lost; run {cell.run_id} was "
                                                                  f"finished by flow run {cell.flow_run_name}"),
                                          force=True)
                marked.append(run.name)
                say(f"sweep: flow run {run.name} of {cell.run_id} marked crashed (its process was lost; "
                    f"{cell.flow_run_name} finished the run)")
    return marked


def failed_line(cells: list[Cell]) -> str | None:
    """One line naming the cells whose flow run did not complete, and how to finish them; None when all did."""
    bad = [c for c in cells if not c.ok]
    if not bad:
        return None
    what = "; ".join(f"{c.run_id}: {c.state.lower()}" + (f" ({c.message})" if c.message else "") for c in bad)
    return (f"sweep: {len(bad)} of {len(cells)} runs did not complete: {what}. Run the same sweep again (finished "
            "runs are not resubmitted; the others resume on a worker) or `evosyn run --resume RUN_ID`")
