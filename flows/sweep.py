"""Sweeps: domains x arms x seeds, each an `evosyn-run` subflow."""
from __future__ import annotations

from prefect import flow

from flows.run import RunSummary, evosyn_run
from storage.config import ConfigError, RunConfig, read_config_file, validate_config


def load_sweep(path: str, home: str | None = None) -> tuple[RunConfig, dict]:
    data = read_config_file(path)
    grid = data.pop("sweep", None) if isinstance(data, dict) else None
    if not isinstance(grid, dict):
        raise ConfigError(f"invalid config {path}: field 'sweep': missing (add sweep: {{domains, arms, seeds}})")
    base = validate_config(data, source=f"config {path}")
    if home and not base.store.root:
        base.store.root = home
    unknown = set(grid) - {"domains", "arms", "seeds"}
    if unknown:
        raise ConfigError(f"invalid config {path}: field 'sweep.{sorted(unknown)[0]}': unknown field")
    out = {"domains": grid.get("domains", [base.domain]), "arms": grid.get("arms", [base.arm]),
           "seeds": grid.get("seeds", [base.seed])}
    for d in out["domains"]:
        for a in out["arms"]:
            for s in out["seeds"]:
                validate_config({**base.model_dump(), "domain": d, "arm": a, "seed": s}, source=f"config {path}")
    return base, out


def generating_domains() -> list[str]:
    """Every domain pack with an environment and an embedded generator (a sweep's default domains)."""
    from envs.packs import get_pack, known

    return [d for d in known(with_environment=True) if get_pack(d).has_generator]


@flow(name="evosyn-sweep")
def sweep_flow(base: RunConfig, domains: list[str] | None, arms: list[str], seeds: list[int]) -> list[RunSummary]:
    results = []
    for domain in domains or generating_domains():
        for arm in arms:
            for seed in seeds:
                cfg = base.model_copy(update={"domain": domain, "arm": arm, "seed": seed})
                results.append(evosyn_run(cfg))
    return results
