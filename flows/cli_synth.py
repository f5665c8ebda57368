"""`evosyn synth`."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from evosyn.flows.cli_fields import FieldChoice
from evosyn.flows.cli_app import PATH, UserError, main
from evosyn.flows.inputs import store_from
from evosyn.flows.render import print_table

if TYPE_CHECKING:
    from evosyn.config import RoleConfig


def load_space_file(path: str, domain: str, run_id: str):
    from evosyn.envs.ontology import SpaceError, validate_space
    from evosyn.storage.userfiles import ConfigError, read_text_file
    from evosyn.storage.records import Factor, SynthesisSpace

    try:
        raw = json.loads(read_text_file(path, prefix=f"--space {path}"))
        factors = [Factor(**{k: v for k, v in f.items()}) for f in raw["factors"]]
        space = SynthesisSpace(run_id=run_id, round=0, space_version=raw.get("version", 1), domain=domain,
                               version=raw.get("version", 1), factors=factors,
                               restrictions=raw.get("restrictions", {}))
        return validate_space(space)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    except (json.JSONDecodeError, KeyError, TypeError, SpaceError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise UserError(f"--space {path}: not a valid synthesis space ({first})") from None


def run_synth(ctx, domain: str, n: int, seed: int, space_file: str | None, run_id: str | None,
              chunk_size: int = 50, fresh: bool = False, llm_roles: dict[str, RoleConfig] | None = None,
              factors: tuple[str, ...] = (), quiet: bool = False):
    """One pass of the round's stages into the store (tasks/synthesis.py): a rerun resumes it.

    ``llm_roles``: role -> RoleConfig of the roles that run on an LLM (checked by ``check_roles``), as in a
    round; the others are embedded. ``fresh``: the run's earlier pass is deleted first, so all of it is
    computed (a benchmark times the work). ``quiet``: plain stage lines, no live display. ``factors``: controllable factors of the domain's generator
    added to the space as experimental factors, as a Reflector adds them. Returns (run id, pass, space).
    """
    import hashlib

    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.flows.compile import compile_domain
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import PassConflict, backends, claim, run_pass

    env = compile_domain(domain, generator=True).env
    domain = env.name
    check_factors(env.pack, factors)
    if run_id is not None and run_id.startswith(("testset-", "probeset-")):  # the test and probe sets' namespace
        raise UserError(f"--run-id {run_id}: ids starting with testset- or probeset- belong to the fixed test sets "
                        "and the Reflector's probe sets; pick another")
    space = load_space_file(space_file, domain, "synth") if space_file else None
    if run_id is None:  # named by its inputs, so a rerun finds (and resumes) its own pass
        spaced = f"-space{space_digest(space)}" if space is not None else ""
        llm = "-llm" + hashlib.sha256(repr(backends(llm_roles)).encode()).hexdigest()[:8] if llm_roles else ""
        source = env.data_source  # the config's env_data: another data folder, another pass
        data = f"-d{hashlib.sha256(source.encode()).hexdigest()[:8]}" if source else ""
        run_id = f"synth-{domain}-s{seed}-n{n}{spaced}{data}{llm}" + "".join(f"-{f}" for f in factors)
    space = space.model_copy(update={"run_id": run_id}) if space is not None else \
        load_initial_space(env.pack, run_id=run_id)
    if factors:
        space = with_factors(space, env.pack.controllable, factors)
    store = store_from(ctx)  # a store root that cannot be created is refused before the work
    if fresh:
        store.delete_run(run_id)
    pass_ctx, steering = Ctx(store, run_id, 0, seed, env, llm_roles=llm_roles or {}), ColdStart()
    try:
        claim(pass_ctx, space, steering, n, "evosyn", chunk_size)  # before any output: a refusal is one line
    except PassConflict as exc:
        raise UserError(f"--run-id {run_id}: {exc}") from None
    from evosyn.flows.progress import renderer

    with renderer(quiet) as show:
        result = run_pass(pass_ctx, space, steering, n, chunk_size=chunk_size, emit=show)
    return run_id, result, space


def with_factors(space, controllable: dict[str, list[str]], factors: tuple[str, ...]):
    """The space plus each named factor (tasks/datasets.py; here for the callers that import it from here)."""
    from evosyn.tasks.datasets import with_factors as add

    return add(space, controllable, factors)


def check_factors(pack, factors: tuple[str, ...]) -> None:
    """Each --factor is a property the pack's generator controls (one line naming them otherwise)."""
    controllable = pack.controllable
    for name in factors:
        if name not in controllable:
            raise UserError(f"--factor {name}: the {pack.name} generator does not control it "
                            f"(it controls: {', '.join(sorted(controllable)) or 'nothing'})")


def space_digest(space) -> str:
    import hashlib

    return hashlib.sha256(space.model_dump_json(exclude={"run_id", "created_at"}).encode()).hexdigest()[:8]


@main.command()
@click.option("--domain", default=None, help="A domain pack (default: the default pack).")
@click.option("--n", "n", type=click.IntRange(1, 1_000_000), default=100, show_default=True, help="Blueprints.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--space", "space_file", type=PATH, help="A synthesis space JSON file.")
@click.option("--run-id", default=None,
              help="Store partition (default synth-<domain>-s<seed>-n<n>, plus the --space file's digest).")
@click.option("--chunk-size", type=click.IntRange(1, 100_000), default=50, show_default=True,
              help="Blueprints per generate / rollout / verify chunk, as in a round.")
@click.option("--backend", type=FieldChoice("RunConfig.backend"), default=None)
@click.option("--config", "config_file", type=PATH, default=None,
              help="A run config whose roles.<role> settings choose each role's backend, as in `evosyn run`.")
@click.option("--factor", "factors", multiple=True,
              help="Add a factor the domain's generator controls (e.g. num_write) to the space; repeatable. "
                   "Each requested factor gets a requested-vs-realized table.")
@click.option("--quiet", is_flag=True, help="One plain line per finished stage, no live display "
                                            "(also when stderr is not a terminal).")
@click.pass_context
def synth(ctx, domain: str, n: int, seed: int, space_file: str | None, run_id: str | None, chunk_size: int,
          backend: str | None, config_file: str | None, factors: tuple[str, ...], quiet: bool) -> None:
    """One synthesis pass (design, plan, generate, rollout, verify, repair) into the store; a rerun resumes it."""
    from evosyn.tasks.synthesis import control, summary

    llm = None
    if backend or config_file:  # the run's config rules: roles, checked before any work, as `evosyn run` does
        from evosyn.flows.cli_run import _config

        llm = _config(ctx, config_file, domain=domain, seed=seed, backend=backend).llm_roles
    run_id, result, space = run_synth(ctx, domain, n, seed, space_file, run_id, chunk_size, llm_roles=llm,
                                      factors=factors, quiet=quiet)
    by_slice, reasons = summary(result)
    slices = sorted({k for k, _ in by_slice})
    print_table(f"run {run_id}: {len(result.kept)} of {len(result.blueprints)} blueprints verified",
                ["task_family", "outcome", "verified", "of"],
                [[f, o, by_slice[((f, o), "kept")], by_slice[((f, o), "total")]] for f, o in slices])
    if reasons:
        print_table("rejections", ["reason", "count"], [[r, k] for r, k in reasons.most_common(15)])
    for key, rows in control(result, space).items():
        requested, generated, exact = (sum(r[i] for r in rows) for i in (1, 2, 3))
        print_table(f"{key}: requested vs realized (first rollout, before the factor gate)",
                    [key, "requested", "generated", "realized", "kept"], [list(r) for r in rows])
        click.echo(f"{key}: {exact}/{requested} requests exact ({exact / max(requested, 1):.1%}; a blueprint that "
                   f"became no task is a miss), {exact}/{generated} generated exact")
