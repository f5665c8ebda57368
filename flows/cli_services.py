"""`evosyn up`, `evosyn down`, `evosyn deploy`: the local Prefect + MLflow stack and the deployments."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from evosyn.flows.cli_app import UserError, main

POOLS = {"cpu": "process", "gpu": "process"}  # a cluster swaps these for kubernetes / docker pools (README)
# what each pool runs (deployments/prefect.yaml) and where its worker belongs
POOL_USE = {"cpu": ("runs of evosyn-run and evosyn-sweep", "any machine that has this checkout"),
            "gpu": ("runs of sft-train (training per round)", "a GPU machine that has this checkout")}


def _root(ctx) -> Path:
    """This machine's folder of the store (an ``s3://`` store's local folder: its services run here)."""
    from evosyn.flows.inputs import store_root

    return store_root(ctx.obj.get("home")).resolve()


def recorded_state(root: Path) -> dict:
    """services.json of ``root``; an unreadable one is one line naming it (never a JSON traceback)."""
    from evosyn.flows.services import load_state, state_path

    try:
        return load_state(root)
    except (OSError, ValueError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(f"{state_path(root)}: unreadable ({first}); if no `evosyn up` service of this root is "
                        "still running, delete the file") from None


def project_dir(explicit: str | None = None) -> Path:
    """The checkout that holds deployments/prefect.yaml: given, the current directory, or the installed one."""
    from evosyn import flows

    candidates = [Path(explicit)] if explicit else [Path.cwd(), Path(flows.__file__).resolve().parents[1]]
    for cand in candidates:
        if (cand / "deployments" / "prefect.yaml").is_file():
            return cand.resolve()
    raise UserError(f"--project-dir: no deployments/prefect.yaml under {', '.join(map(str, candidates))} "
                    "(run from the repository root or pass --project-dir)")


@main.command()
@click.option("--prefect-port", type=click.IntRange(1, 65535), default=4200, show_default=True,
              envvar="EVOSYN_PREFECT_PORT")
@click.option("--mlflow-port", type=click.IntRange(1, 65535), default=5000, show_default=True,
              envvar="EVOSYN_MLFLOW_PORT")
@click.option("--pool", "pools", multiple=True, default=("cpu",), show_default=True,
              help="Start a process worker for this work pool (repeatable, e.g. --pool cpu --pool gpu).")
@click.option("--project-dir", "project", default=None, help="Checkout the workers load the flows from.")
@click.option("--timeout", type=float, default=180.0, show_default=True, help="Seconds to wait for health.")
@click.option("--db", default=None, envvar="EVOSYN_DB", metavar="URL|local",
              help="Keep Prefect's and MLflow's tables in PostgreSQL: postgresql://user:password@host:port/name "
                   "(MLflow uses name_mlflow on the same server), or `local` for a server of this store root "
                   "(needs the postgres extra; default: sqlite files in the store root).")
@click.pass_context
def up(ctx, prefect_port: int, mlflow_port: int, pools: tuple[str, ...], project: str | None,
       timeout: float, db: str | None) -> None:
    """Start a Prefect server, an MLflow server (UI) and process workers; a second `up` starts nothing new."""
    from evosyn.flows.services import ServiceError
    from evosyn.flows.services import up as start

    unknown = [p for p in pools if p not in POOLS]
    if unknown:
        raise UserError(f"--pool {unknown[0]}: unknown work pool (known: {', '.join(POOLS)})")
    from evosyn.flows.inputs import check_store_root, store_root

    check_store_root(store_root(ctx.obj.get("home")))  # as given: resolving would follow a broken symlink
    from evosyn.storage import postgres

    root = _root(ctx)
    recorded_state(root)
    if db and db != "local":
        try:
            postgres.check(db)
        except postgres.PostgresError as exc:
            raise UserError(f"--db {exc}") from None
    try:
        state = start(root, project_dir(project), prefect_port, mlflow_port, pools,
                      timeout, say=lambda s: click.echo(s, err=True), db=db)
    except ServiceError as exc:
        raise UserError(f"{exc} (stop what started with `evosyn down`)") from None
    on_pg = bool(db) or "postgres" in state
    click.echo(f"Prefect UI   {state['prefect'].url}")
    click.echo(f"MLflow UI    {state['mlflow'].url}")
    # on PostgreSQL the runs log through the MLflow server (the sqlite file in the root is not what it serves)
    tracking = state["mlflow"].url if on_pg else None
    click.echo(f"  rounds     {state['mlflow'].url}/{_rounds_view(root, tracking)}  (round metrics as columns)")
    if on_pg:
        click.echo(f"database     PostgreSQL{' ' + state['postgres'].url if 'postgres' in state else ''} "
                   f"(runs started here: export MLFLOW_TRACKING_URI={state['mlflow'].url})")
    click.echo(f"store root   {root}  (PIDs in {root / 'services.json'})")
    api = f"{state['prefect'].url}/api"
    # a pool this `up` started no worker for may have one from elsewhere: ask the server
    for pool, why in pools_without_worker(api, tuple(p for p in POOLS if p not in pools)).items():
        click.echo(worker_hint(pool, why, api))
    click.echo(f"next: export PREFECT_API_URL={state['prefect'].url}/api && evosyn deploy")


def _rounds_view(root: Path, tracking_uri: str | None = None) -> str:
    """The UI path of the experiment's rounds table (creating the experiment in the store the server serves)."""
    from evosyn.storage.tracking import Tracker, default_tracking_uri, rounds_view_path

    return rounds_view_path(Tracker(root, tracking_uri or default_tracking_uri(root)).experiment_id)


@main.command()
@click.pass_context
def down(ctx) -> None:
    """Stop the services `evosyn up` started (by PID) and check that none of their processes remain."""
    from evosyn.flows.services import down as stop

    root = _root(ctx)
    if not recorded_state(root):
        click.echo(f"nothing recorded in {root / 'services.json'}: nothing to stop")
        return
    left = stop(root, say=lambda s: click.echo(s, err=True))
    if left:
        raise UserError(f"processes still running after stop: {', '.join(map(str, left))}")
    click.echo("all services stopped; no process of theirs remains")


def _api_url(root: Path) -> str:
    from evosyn.flows.services import alive, http_ok

    state = recorded_state(root)
    if "prefect" in state and alive(state["prefect"].pid):
        url = f"{state['prefect'].url}/api"
    elif os.environ.get("PREFECT_API_URL"):
        url = os.environ["PREFECT_API_URL"].rstrip("/")
    else:
        raise UserError(f"no Prefect server: run `evosyn up` first (or set PREFECT_API_URL); store root {root}")
    if not http_ok(f"{url}/health"):
        raise UserError(f"Prefect API {url} does not answer (is the server up? `evosyn up`)")
    return url


def ensure_pools(api_url: str) -> list[str]:
    """Create the work pools that do not exist yet; returns the names created."""
    os.environ["PREFECT_API_URL"] = api_url
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    created = []
    with get_client(sync_client=True) as client:
        for name, kind in POOLS.items():
            try:
                client.read_work_pool(name)
            except ObjectNotFound:
                client.create_work_pool(WorkPoolCreate(
                    name=name, type=kind, base_job_template=ProcessWorker.get_default_base_job_template()))
                created.append(name)
    return created


def pools_without_worker(api_url: str, names: tuple[str, ...] = tuple(POOLS)) -> dict[str, str]:
    """Each pool of ``names`` that has no online worker, with why: ``"no worker"`` or ``"not created yet"``."""
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import WorkPoolFilter, WorkPoolFilterName
    from prefect.client.schemas.objects import WorkerStatus

    idle: dict[str, str] = {}
    if not names:
        return idle
    with SyncPrefectClient(api_url) as client:
        pools = client.read_work_pools(work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=list(names))))
        have = {p.name for p in pools}
        for name in names:
            if name not in have:
                idle[name] = "not created yet (`evosyn deploy` creates it)"
            elif not any(w.status == WorkerStatus.ONLINE for w in client.read_workers_for_work_pool(name)):
                idle[name] = "no worker"
    return idle


def worker_hint(pool: str, why: str, api_url: str) -> str:
    """One line: the pool has no worker, what waits for one, and the command that starts one."""
    runs, where = POOL_USE.get(pool, ("runs of its deployments", "a machine that has this checkout"))
    return (f"pool {pool}: {why}; {runs} wait until a worker polls it. Start one on {where}: "
            f"`PREFECT_API_URL={api_url} prefect worker start --pool {pool} --type {POOLS.get(pool, 'process')}` "
            f"(or on this machine: `evosyn up --pool {pool}`)")


@main.command()
@click.option("--project-dir", "project", default=None, help="Checkout holding deployments/prefect.yaml.")
@click.pass_context
def deploy(ctx, project: str | None) -> None:
    """Create the `cpu` and `gpu` work pools and register the deployments of deployments/prefect.yaml."""
    root = _root(ctx)
    api = _api_url(root)
    proj = project_dir(project)
    created = ensure_pools(api)
    click.echo(f"work pools: cpu, gpu ({'created ' + ', '.join(created) if created else 'already there'})")
    env = {**os.environ, "PREFECT_API_URL": api, "EVOSYN_PROJECT_DIR": str(proj)}
    cmd = [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all",
           "--prefect-file", str(proj / "deployments" / "prefect.yaml")]
    done = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
        raise UserError(f"prefect deploy failed: {' | '.join(lines[-4:])}")
    click.echo("deployments: evosyn-run/evosyn-run, evosyn-sweep/evosyn-sweep (cron, inactive), "
               "sft-train/sft-train")
    for pool, why in pools_without_worker(api).items():
        click.echo(worker_hint(pool, why, api))
    click.echo(f"start a run: PREFECT_API_URL={api} prefect deployment run evosyn-run/evosyn-run "
               "--params '{\"cfg\": {\"rounds\": 1, \"budget\": 40}}'")
