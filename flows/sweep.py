"""Sweeps: domains x arms x seeds, each an `evosyn-run` subflow, or with ``submit: deployment`` each a flow run
of the `evosyn-run` deployment on its work pool's workers (flows/sweep_workers.py).

No domain is named here: a sweep that lists no domains (or an empty list, as the
weekly deployment does) runs every domain pack that has an environment and an embedded generator
(``evosyn.envs.packs``), so adding a pack adds it to the sweep.
"""
from __future__ import annotations

from typing import Callable, Literal

from prefect import flow

from evosyn.envs import packs
from evosyn.flows.run import RunSummary, evosyn_run
from evosyn.flows.sweep_workers import (DEFAULT_DEPLOYMENT, SUBMIT_MODES, Cell, crash_superseded, submit_cells,
                                 wait_cells)
from evosyn.tasks.progress import StageEvent
from evosyn.config import ConfigError, RunConfig, read_config_file, validate_config

GRID_FIELDS = ("domains", "arms", "seeds")
OPTION_FIELDS = ("submit", "deployment")  # how the cells run: in this process, or on a deployment's workers


def sweep_domains(domains: list[str] | None) -> list[str]:
    """The given domains in order (duplicates dropped), or every known domain with an environment and a generator."""
    if domains:
        named = list(dict.fromkeys(domains))
        runnable = packs.known(with_environment=True, with_generator=True)
        for d in named:
            if d not in runnable:
                raise ConfigError(f"invalid sweep: field 'sweep.domains': {d!r} is not a domain pack with an "
                                  f"environment and a generator (known: {', '.join(runnable) or 'none'})")
        return named
    found = packs.known(with_environment=True, with_generator=True)
    if not found:
        raise ConfigError("no domain to sweep: no installed domain pack has an environment and a generator "
                          "(add one under domains/, or list sweep.domains)")
    return found


def _grid_list(grid: dict, key: str, default: list, path: str) -> list:
    value = grid.get(key)
    if value is None:
        return default
    if not isinstance(value, list):
        raise ConfigError(f"invalid config {path}: field 'sweep.{key}': must be a list (got {value!r})")
    return value


def load_sweep(path: str, home: str | None = None) -> tuple[RunConfig, dict]:
    data = read_config_file(path)
    grid = data.pop("sweep", None) if isinstance(data, dict) else None
    if not isinstance(grid, dict):
        raise ConfigError(f"invalid config {path}: field 'sweep': missing (add sweep: {{domains, arms, seeds}})")
    base = validate_config(data, source=f"config {path}")
    if home and not base.store.root:
        base.store.root = home
    unknown = set(grid) - set(GRID_FIELDS) - set(OPTION_FIELDS)
    if unknown:
        raise ConfigError(f"invalid config {path}: field 'sweep.{sorted(unknown)[0]}': unknown field")
    domains = _grid_list(grid, "domains", [], path)
    if not all(isinstance(d, str) for d in domains):
        raise ConfigError(f"invalid config {path}: field 'sweep.domains': must list domain names (got {domains!r})")
    out = {"domains": sweep_domains(domains), "arms": _grid_list(grid, "arms", [base.arm], path),
           "seeds": _grid_list(grid, "seeds", [base.seed], path)}
    sweep_configs(base, **out, source=f"config {path}")  # every cell validates before anything runs
    if grid.get("submit") is not None:
        if grid["submit"] not in SUBMIT_MODES:
            raise ConfigError(f"invalid config {path}: field 'sweep.submit': one of {', '.join(SUBMIT_MODES)} "
                              f"(got {grid['submit']!r})")
        out["submit"] = grid["submit"]
    if grid.get("deployment") is not None:
        if not isinstance(grid["deployment"], str) or grid["deployment"].count("/") != 1:
            raise ConfigError(f"invalid config {path}: field 'sweep.deployment': a 'flow/deployment' name "
                              f"(got {grid['deployment']!r})")
        out["deployment"] = grid["deployment"]
    return base, out


def sweep_configs(base: RunConfig, domains: list[str], arms: list[str], seeds: list[int],
                  source: str = "sweep") -> list[RunConfig]:
    """The run config of every cell, domain-major then arm then seed, each validated."""
    dump = base.model_dump()
    return [validate_config({**dump, "domain": d, "arm": a, "seed": s}, source=source)
            for d in sweep_domains(domains) for a in arms for s in seeds]


@flow(name="evosyn-sweep")
def sweep_flow(base: RunConfig, domains: list[str] | None, arms: list[str], seeds: list[int],
               progress: Callable[[str | StageEvent], None] | None = None,
               submit: Literal["inline", "deployment"] = "inline", deployment: str = DEFAULT_DEPLOYMENT,
               timeout: float | None = None) -> list[RunSummary] | list[Cell]:
    """Every (domain, arm, seed) run as a subflow; ``domains`` empty: every known domain with an environment and a
    generator. ``progress``: as ``evosyn_run``'s, for every run (each message names its run).

    ``submit="deployment"``: each run a flow run of ``deployment`` instead, on its pool's workers; waits for
    them (at most ``timeout`` seconds) and returns the cells with their final states."""
    cfgs = sweep_configs(base, domains, arms, seeds)
    if submit == "deployment":
        say = progress or (lambda s: None)
        cells = wait_cells(submit_cells(cfgs, deployment, say=say), timeout=timeout, say=say)
        crash_superseded(cells, say=say)  # a lost worker's flow runs of the runs finished now
        return cells
    out = []
    for i, cfg in enumerate(cfgs, 1):
        if progress:
            progress(f"sweep run {i}/{len(cfgs)}: {cfg.domain}, arm {cfg.arm}, seed {cfg.seed}")
        out.append(evosyn_run(cfg, progress=progress))
    return out
