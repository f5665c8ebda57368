"""`evosyn synth`."""
from __future__ import annotations

from typing import TYPE_CHECKING

import click

from evosyn.flows.cli_fields import FieldChoice
from evosyn.flows.cli_app import PATH, UserError, main
from evosyn.flows.inputs import check_seed, store_from
from evosyn.flows.render import print_table

if TYPE_CHECKING:
    from evosyn.config import RoleConfig


def load_space_file(path: str, domain: str, run_id: str):
    from evosyn.envs.ontology import SpaceError, validate_space
    from evosyn.storage.userfiles import ConfigError, read_json_file
    from evosyn.storage.records import Factor, SynthesisSpace

    try:
        raw = read_json_file(path, prefix=f"--space {path}")
        factors = [Factor(**{k: v for k, v in f.items()}) for f in raw["factors"]]
        space = SynthesisSpace(run_id=run_id, round=0, space_version=raw.get("version", 1), domain=domain,
                               version=raw.get("version", 1), factors=factors,
                               restrictions=raw.get("restrictions", {}))
        return validate_space(space)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    except (KeyError, TypeError, SpaceError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise UserError(f"--space {path}: not a valid synthesis space ({first})") from None


def run_synth(ctx, domain: str, n: int, seed: int, space_file: str | None, run_id: str | None,
              chunk_size: int = 50, fresh: bool = False, llm_roles: dict[str, RoleConfig] | None = None,
              factors: tuple[str, ...] = (), quiet: bool = False, reuse: bool = False):
    """One pass of the round's stages into the store (tasks/synthesis.py): a rerun resumes it.

    ``llm_roles``: role -> RoleConfig of the roles that run on an LLM (checked by ``check_roles``), as in a
    round; the others are embedded. ``fresh``: the run's earlier pass is deleted first, so all of it is
    computed (a benchmark times the work). ``quiet``: plain stage lines, no live display. ``factors``: controllable factors of the domain's generator
    added to the space as experimental factors, as a Reflector adds them. ``reuse``: after an edit of a user's
    pack, continue the pass made before it (flows/pack_reruns.py). Returns (run id, pass, space).
    """
    import hashlib

    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.flows.compile import compile_domain
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import PassConflict, backends, claim, run_pass

    check_seed(seed)
    env = compile_domain(domain, generator=True).env
    domain = env.name
    check_factors(env.pack, factors)
    if run_id is not None and run_id.startswith(("testset-", "probeset-")):  # the test and probe sets' namespace
        raise UserError(f"--run-id {run_id}: ids starting with testset- or probeset- belong to the fixed test sets "
                        "and the Reflector's probe sets; pick another")
    space = load_space_file(space_file, domain, "synth") if space_file else None
    base = None
    if run_id is None:  # named by its inputs, so a rerun finds (and resumes) its own pass
        spaced = f"-space{space_digest(space)}" if space is not None else ""
        llm = "-llm" + hashlib.sha256(repr(backends(llm_roles)).encode()).hexdigest()[:8] if llm_roles else ""
        source = env.data_source  # the config's env_data: another data folder, another pass
        data = f"-d{hashlib.sha256(source.encode()).hexdigest()[:8]}" if source else ""
        base = f"synth-{domain}-s{seed}-n{n}{spaced}{data}{llm}" + "".join(f"-{f}" for f in factors)
    space = space if space is not None else load_initial_space(env.pack, run_id=run_id or base)
    if factors:
        space = with_factors(space, env.pack.controllable, factors)
    store = store_from(ctx)  # a store root that cannot be created is refused before the work
    rerun = None
    if base is not None:  # a user's pack: its code version is part of the default id
        rerun = pass_rerun(store, env.pack, base, reuse)
        run_id = rerun.run_id
    space = space.model_copy(update={"run_id": run_id})
    if fresh:
        store.delete_run(run_id)
    pass_ctx, steering = Ctx(store, run_id, 0, seed, env, llm_roles=llm_roles or {}), ColdStart()
    try:
        claim(pass_ctx, space, steering, n, "evosyn", chunk_size, reuse)  # before any output: a refusal is one line
    except PassConflict as exc:
        raise UserError(f"--run-id {run_id}: {exc}") from None
    if rerun is not None:
        rerun.begin(store)
    from evosyn.flows.progress import renderer

    with renderer(quiet) as show:
        result = run_pass(pass_ctx, space, steering, n, chunk_size=chunk_size, emit=show, reuse=reuse)
    return run_id, result, space


def pass_rerun(store, pack, base: str, reuse: bool):
    """The default id of a pass of ``pack`` keyed ``base``: a user's pack adds ``-p<its code version>``, so a
    rerun after an edit is a new pass, and one line names the change (flows/pack_reruns.py)."""
    from evosyn.envs.pack_version import SHOWN, pack_version
    from evosyn.flows.pack_reruns import choose
    from evosyn.tasks.synthesis import INPUTS_STAGE

    version = pack_version(pack)
    new_id = f"{base}-p{version[:SHOWN]}" if version else base
    return choose(store, "pass", pack.name, version, base, new_id, f"{base}*",
                  lambda rid: store.is_complete(INPUTS_STAGE, rid, 0), reuse)


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
              help="Store partition (default synth-<domain>-s<seed>-n<n>, plus the --space file's digest, and for a "
                   "pack of your own -p<its code version>).")
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
@click.option("--reuse", is_flag=True, help="After an edit of your pack: continue the pass made before the edit "
                                            "(the default id covers the pack's code, so a rerun is a new pass).")
@click.pass_context
def synth(ctx, domain: str, n: int, seed: int, space_file: str | None, run_id: str | None, chunk_size: int,
          backend: str | None, config_file: str | None, factors: tuple[str, ...], quiet: bool, reuse: bool) -> None:
    """One synthesis pass (design, plan, generate, rollout, verify, repair) into the store; a rerun resumes it."""
    from evosyn.tasks.synthesis import control, summary

    llm = None
    if backend or config_file:  # the run's config rules: roles, checked before any work, as `evosyn run` does
        from evosyn.flows.cli_run import _config

        llm = _config(ctx, config_file, domain=domain, seed=seed, backend=backend).llm_roles
    run_id, result, space = run_synth(ctx, domain, n, seed, space_file, run_id, chunk_size, llm_roles=llm,
                                      factors=factors, quiet=quiet, reuse=reuse)
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
    import os

    from evosyn.flows.examples import show_line

    home = ctx.obj.get("home")
    home = f"--home {home} " if home and home != os.environ.get("EVOSYN_HOME") else ""  # as given: repeated
    line = show_line([{"round": v.round, "trajectory_id": v.trajectory_id, "passed": v.passed} for v in result.verdicts],
                     run_id, home)
    if line:  # an id to look at, without writing SQL first
        click.echo(f"next:\n{line}")
