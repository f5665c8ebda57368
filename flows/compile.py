"""The compile step: a command's run config checked against its domain pack and resolved once.

``evosyn run``, ``sweep``, the ``evosyn-run`` deployment (``evosyn.flows.run.evosyn_run``) call ``compile_run``;
``synth`` and ``evaluate`` call ``compile_domain``, ``envs check`` ``pack_findings``, and the commands that read
the store ``stored_domain``. Each check fails with one line naming the field and the fix,
before any work starts, and what they resolve (the pack, its environment on the run's data, the LLM roles, the
fixed test sets' run ids) is handed to the stages as objects: below this step no code looks the domain up by its
name again. (The registry, ``evosyn.envs.packs``, is the only other place that maps a name to a pack.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evosyn.envs.packs import UnknownDomain, get_domain, get_pack
from evosyn.flows.cli_app import UserError

if TYPE_CHECKING:
    from evosyn.envs.base import Domain
    from evosyn.envs.pack_check import Finding
    from evosyn.envs.packs import DomainPack
    from evosyn.config import RoleConfig, RunConfig


@dataclass(frozen=True)
class CompiledDomain:
    """A domain name resolved: its pack and its environment (on the data the config names)."""

    env: Domain

    @property
    def pack(self) -> DomainPack:
        return self.env.pack

    @property
    def name(self) -> str:
        return self.env.name


@dataclass(frozen=True, kw_only=True)
class CompiledRun(CompiledDomain):
    """A run config checked against its pack, with everything the rounds need resolved.

    ``cfg``: the config with its domain filled in (``""`` is the default pack); ``llm_roles``: the roles that run
    on an LLM (the others embedded); ``test_sets``: kind -> the run id of each fixed test set the domain has
    (``official-matched`` is left out for a domain without official tasks, with ``skipped`` saying why).
    """

    cfg: RunConfig
    llm_roles: dict[str, RoleConfig] = field(default_factory=dict)
    test_sets: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def check_domain(name: str | None, option: str = "--domain", generator: bool = False, run: bool = False) -> str:
    """A known domain with an environment (the default pack when empty), before any work.

    ``generator``: the command synthesizes with the embedded generator, so the
    domain's pack must have one, and the pack is checked as a synthesis needs
    it (``evosyn.envs.pack_check``: its space, its environment's tools, its policy
    module); ``run``: also as a closed-loop run needs it (``controllable``).
    Otherwise one UserError line naming the setting and the fix.
    """
    from evosyn.envs.packs import PackError, broken, default_domain, known

    if not name:
        try:
            name = default_domain()
        except PackError as exc:  # not exactly one default pack: one line naming them and the fix
            raise UserError(str(exc)) from None
    failed = broken()
    if name in failed and name not in known():  # (a second pack of a registered name fails, the first stays)
        raise UserError(f"{option} {name}: the pack failed to load: {failed[name]} (`evosyn --debug envs check "
                        f"{name}` shows the traceback)")
    runnable = known(with_environment=True)
    if name not in runnable:
        raise UserError(f"{option} {name}: unknown domain (known domains: {', '.join(runnable)})")
    if generator and name not in known(with_environment=True, with_generator=True):
        ready = known(with_environment=True, with_generator=True)
        raise UserError(f"{option} {name}: task_builder: the embedded backend has no generator for this domain yet "
                        f"(domains with one: {', '.join(ready)}); define task_builder(domain, prior) in its pack")
    if generator or run:
        from evosyn.envs.pack_check import first_error

        why = first_error(get_pack(name), "run" if run else "synth")
        if why is not None:
            raise UserError(f"{option} {name}: {why}")
    return name


def compile_domain(name: str | None, option: str = "--domain", *, generator: bool = False, run: bool = False
                   ) -> CompiledDomain:
    """``name`` (empty: the default pack) checked as the command needs it (``evosyn.flows.inputs.check_domain``:
    one ``UserError`` line otherwise) and resolved to its environment."""
    return CompiledDomain(get_domain(check_domain(name, option, generator=generator, run=run)))


def pack_findings(name: str) -> list[Finding]:
    """``evosyn envs check NAME``: the named pack's findings (``evosyn.envs.pack_check.problems``); an unknown
    name is one error finding that lists the known ones."""
    from evosyn.envs.pack_check import Finding, problems

    try:
        pack = get_pack(name)
    except UnknownDomain as exc:
        return [Finding("error", "pack", str(exc))]
    return problems(pack, "check")


def stored_domain(name: str) -> Domain:
    """The environment a stored row names (a run's, a task's ``domain``), for the commands that read the store:
    resolved once by the command and handed down. The pack must still be installed (``UnknownDomain`` names the
    known ones)."""
    return get_domain(name)


def check_served(served) -> None:
    """The served learner's key is set (``.env`` read first), before any work: one line naming the variable."""
    import os

    from evosyn.storage.userfiles import ConfigError, load_dotenv_secrets

    if served.api_key_env:
        load_dotenv_secrets()
        if not os.environ.get(served.api_key_env):
            raise ConfigError(f"served.api_key_env: {served.api_key_env} is not set (export it or add it to .env)")


def compile_run(cfg: RunConfig) -> CompiledRun:
    """Every check a run makes before its first stage, in this order, then the resolved run.

    Raises the check's own one-line error: ``ConfigError`` (roles, env_data, prior, initial_factors,
    official_eval), ``UserError`` (the domain), ``TrainingError`` (``learner: llamafactory``),
    ``TaskRunnerMissing`` (``task_runner: dask``). The CLI turns each into its one-line exit.
    """
    from evosyn.agents.roles import check_roles
    from evosyn.envs.ontology import check_initial_factors
    from evosyn.envs.properties import check_prior
    from evosyn.flows.inputs import use_env_data
    from evosyn.flows.task_runners import check_task_runner
    from evosyn.storage.userfiles import load_dotenv_secrets
    from evosyn.tasks.testset import KINDS, skipped_line, test_set_run_id

    roles = {}
    if cfg.backend == "llm" or any(rc.backend == "llm" for rc in cfg.roles.values()):
        load_dotenv_secrets()  # API keys may come from ./.env; they are read, never stored
        roles = check_roles(cfg)  # provider, model and key of every LLM role
    name = check_domain(cfg.domain, generator=True, run=True)  # the fixed test set is always built embedded
    if name != cfg.domain:
        cfg = cfg.model_copy(update={"domain": name})
    use_env_data(cfg)  # the data folders it names, the run's own loaded: every check below reads that data
    env = get_domain(name)
    check_prior(cfg.prior.suppress, env.pack)  # a planted gap names what the generator controls
    check_initial_factors(cfg.initial_factors, env.pack)  # and so do the factors the initial space adds
    if cfg.official_eval is not None:
        from evosyn.tasks.official_agents import check_official_config

        check_official_config(cfg.official_eval, env)  # its split and its LLM user
    if cfg.learner == "served" and cfg.served is not None:
        check_served(cfg.served)  # its key, when it names one
    if cfg.learner == "llamafactory":
        from evosyn.agents.learners.llamafactory import check_learner

        check_learner(cfg.llamafactory, cfg.train_deployment)  # its CLI, and a GPU where the recipe needs one
    check_task_runner(cfg)  # prefect-dask installed
    skipped = {kind: line for kind in KINDS if (line := skipped_line(env, kind)) is not None}
    test_sets = {kind: test_set_run_id(env, n=cfg.test_size, kind=kind) for kind in KINDS if kind not in skipped}
    return CompiledRun(env=env, cfg=cfg, llm_roles=roles, test_sets=test_sets, skipped=skipped)
