"""One place that builds a round's roles, embedded or LLM-backed, from the run config.

A role uses its LLM when ``roles.<role>.backend`` is ``llm``, or when the run's
``backend`` is ``llm`` and the role names a ``provider``; every other role stays
embedded. ``check_roles`` validates every LLM role (provider, model, API key)
before any work starts. Clients are shared per role within a process, so the
per-model concurrency and rate limits hold across the stages' worker threads.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evosyn.agents.ask import RoleInvalid, StageUnavailable, fallback_note  # noqa: F401 (their home before)
from evosyn.envs.base import Domain
from evosyn.config import ConfigError, RoleConfig, RunConfig


LLM_ROLES = ("designer", "planner", "generator", "teacher", "user", "repair", "reflector")
_CLIENTS: dict[tuple[str, str, str], Any] = {}
_LOCK = threading.Lock()


def llm_roles(cfg: RunConfig) -> dict[str, RoleConfig]:
    """The roles that run on an LLM under this config (the rest are embedded)."""
    out = {}
    for role, rc in cfg.roles.items():
        if role not in LLM_ROLES:
            continue
        if rc.backend == "llm" or (cfg.backend == "llm" and rc.provider is not None):
            out[role] = rc.model_copy(update={"backend": "llm"})
    return out


def check_roles(cfg: RunConfig) -> dict[str, RoleConfig]:
    """One-line ``ConfigError`` for the first LLM role that cannot work; before any work starts."""
    from evosyn.agents.llm import check_role_config

    roles = llm_roles(cfg)
    if cfg.backend == "llm" and not roles:
        raise ConfigError("--backend llm: no role has an LLM provider; set roles.<role>.provider and "
                          "roles.<role>.model in the --config file (e.g. roles.planner)")
    for role, rc in roles.items():
        check_role_config(role, rc)
    if "user" in roles and "teacher" not in roles:
        raise ConfigError("roles.user: the LLM user simulator talks to the LLM teacher; configure roles.teacher "
                          "with a provider too, or leave roles.user embedded")
    return roles


def env_context(domain: Any) -> dict:
    """The environment part of the prompts: entity counts, tools and policy."""
    from evosyn.agents.ask import tools_summary

    s = domain.summary()
    return {"environment": {"entity_counts": s.entity_counts, "example_ids": s.example_ids},
            "tools": tools_summary(domain), "policy": domain.policy}


def client_for(role: str, rc: RoleConfig, cache_dir: Path | None):
    from evosyn.agents.llm import make_client

    key = (role, rc.model_dump_json(), str(cache_dir))
    with _LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = make_client(role, rc, cache_dir=cache_dir)
        return _CLIENTS[key]


@dataclass
class Roles:
    designer: Any
    planner: Any
    generator: Any
    teacher: Any
    repair: Any
    reflector: Any
    clients: dict[str, Any] = field(default_factory=dict)
    on_invalid: dict[str, str] = field(default_factory=dict)  # role -> "fail" | "fallback" (RoleConfig.on_invalid)

    def falls_back(self, role: str) -> bool:
        return self.on_invalid.get(role, "fail") == "fallback"

    @property
    def backends(self) -> dict[str, str]:
        return {r: "llm" if r in self.clients else "embedded" for r in LLM_ROLES}


def build_roles(roles: dict[str, RoleConfig] | None, dom: Domain, *, cache_dir: Path | None = None,
                learner_evidence: bool = True, previous_reflections: list | None = None,
                prior: dict[str, dict[str, float]] | None = None,
                prior_writes: dict[int, float] | None = None) -> Roles:
    """The six synthesis roles (plus the user simulator inside the teacher) for one stage in the environment ``dom``
    (its pack gives the designer's and the planner's rules); ``prior``: the embedded
    generator's suppressed buckets (``RunConfig.prior.suppress``), ``prior_writes`` its write counts of a
    fulfilment (``RunConfig.prior.writes``; None: the default)."""
    from evosyn.agents.plans import DefaultPrior
    from evosyn.agents.designer import EmbeddedDesigner, LLMDesigner
    from evosyn.agents.generator import EmbeddedGenerator, LLMGenerator
    from evosyn.agents.planner import EmbeddedPlanner, LLMPlanner
    from evosyn.agents.reflector import EmbeddedReflector
    from evosyn.agents.reflector_llm import LLMReflector
    from evosyn.agents.repair import EmbeddedRepair, LLMRepair
    from evosyn.agents.teacher import EmbeddedTeacher, LLMTeacher

    roles = roles or {}
    # one log per role and stage: chunks running at once share the clients, never each other's calls
    clients = {r: client_for(r, rc, cache_dir).bound() for r, rc in roles.items()}
    retries = {r: rc.max_invalid_retries for r, rc in roles.items()}
    env = env_context(dom) if clients else {}
    rules = dom.pack.planner_rules
    designer = LLMDesigner(clients["designer"], env, retries["designer"]) if "designer" in clients \
        else EmbeddedDesigner(rules)
    planner = LLMPlanner(clients["planner"], env, retries["planner"], rules=rules) if "planner" in clients \
        else EmbeddedPlanner(rules=rules)
    generator = LLMGenerator(dom, clients["generator"], env, retries["generator"]) if "generator" in clients \
        else EmbeddedGenerator(dom, DefaultPrior(suppress=dict(prior or {}),
                                                   **({"writes": dict(prior_writes)} if prior_writes else {})))
    steps = {"max_steps": roles["teacher"].max_steps} if "teacher" in clients and roles["teacher"].max_steps else {}
    teacher = LLMTeacher(dom, clients["teacher"], clients.get("user"), retries=retries["teacher"], **steps) \
        if "teacher" in clients else EmbeddedTeacher(dom)
    embedded_teacher = teacher if isinstance(teacher, EmbeddedTeacher) else EmbeddedTeacher(dom)
    repair = LLMRepair(dom, teacher, clients["repair"], env, retries["repair"]) if "repair" in clients \
        else EmbeddedRepair(dom, embedded_teacher)
    on_invalid = {r: rc.on_invalid for r, rc in roles.items()}
    reflector = LLMReflector(clients["reflector"], retries["reflector"], learner_evidence=learner_evidence,
                             previous=previous_reflections, fail=on_invalid["reflector"] == "fail") \
        if "reflector" in clients else EmbeddedReflector()
    return Roles(designer, planner, generator, teacher, repair, reflector, clients, on_invalid)


NOT_A_CHAT_REPLY = ("the server's reply is not", "the server's reply could not be read")


def _no_reply(call) -> bool:
    """The call got no chat reply: a transport failure, or a body that is no chat completion."""
    return call.status in ("error", "retry") or (call.status == "invalid" and call.error.startswith(NOT_A_CHAT_REPLY))


def flush_calls(roles: Roles, store, *, run_id: str, round: int, chunk: str) -> None:
    """This stage's LLM calls go to the ``llm_calls`` table (one chunk per role and stage).

    A stage flushes before it writes its tables and its marker, so a redo after
    a crash finds the chunk already there: ``write_calls`` keeps those rows and
    adds only what the redo really asked (not the cache's replays of them).

    Then, when no call of a role got a chat reply at all (transport failures: the
    server is down, the URL or the key is wrong; or bodies that are no chat
    completion: the URL points at some other web server), ``StageUnavailable``:
    a stage of rejections only is not a result, and the run must fail loudly. A
    model that answers, however badly, is not this: its rejections are data, unless
    not one of its replies in the stage was usable: then ``RoleInvalid`` (the role's
    ``on_invalid: fail``, the default) or a ``fallback`` row (``on_invalid: fallback``,
    warned about in the stage's line, the report and MLflow). Never silent.
    """
    from evosyn.agents.llm.calllog import write_calls

    down = None
    for role, client in roles.clients.items():
        replies = [c for c in client.log.rows if c.status != "fallback"]
        if replies and not any(c.status == "ok" for c in replies) and not all(_no_reply(c) for c in replies):
            # every reply of the role in this stage was unusable: no silent fallback (RoleConfig.on_invalid)
            last = replies[-1].error
            if roles.falls_back(role):
                if not any(c.status == "fallback" for c in client.log.rows):  # the stage may have said it already
                    client.record_fallback(f"every reply invalid in this stage: {last}", role)
            elif down is None:
                down = RoleInvalid(role, client.endpoint, f"every reply invalid in this stage; last: {last}")
        calls = client.take_calls(run_id, round)
        write_calls(store, calls, f"{chunk}-{role}", role)
        if (down is None or isinstance(down, RoleInvalid)) and any(c.status != "fallback" for c in calls) and \
                all(_no_reply(c) for c in calls if c.status != "fallback"):
            last = next((c for c in reversed(calls) if c.status not in ("retry", "fallback")), calls[-1])
            down = StageUnavailable(role, client.endpoint, last.error)  # a server that is down says so first
    if down is not None:
        raise down
