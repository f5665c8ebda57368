"""The Prefect boundary is typed: the round flow and the stages' tasks take the run config and records, not dicts."""
from __future__ import annotations

import inspect
import typing

import evosyn.flows.round as round_module
from evosyn.tasks import checkpoint, loop, official_agents, stages
from evosyn.tasks.stages import Ctx
from evosyn.config import RoleConfig, RunConfig


def _prefect_callables():  # the round flow, and each stage's task beside its function in tasks/
    modules = (round_module, stages, loop, checkpoint, official_agents)
    return [obj for m in modules for obj in vars(m).values() if hasattr(obj, "fn") and hasattr(obj, "name")]


def test_the_round_flow_and_its_tasks_take_models_not_dicts():
    found = _prefect_callables()
    assert {c.name for c in found} >= {"evosyn-round", "design", "plan", "generate", "rollout", "verify", "train",
                                       "evaluate", "reflect"}
    for c in found:
        hints = typing.get_type_hints(c.fn)
        untyped = [p for p in inspect.signature(c.fn).parameters if p not in hints]
        assert not untyped, f"{c.name}: parameters without a type: {untyped}"
        loose = {p: t for p, t in hints.items() if p != "return" and ("dict" in str(t) or t is typing.Any)}
        assert not loose, f"{c.name} takes {loose}"
    assert typing.get_type_hints(round_module.round_flow.fn)["cfg"] is RunConfig


def test_a_rounds_context_comes_from_the_run_config(tmp_path):
    cfg = RunConfig(seed=4, store={"root": str(tmp_path)}, roles={
        "planner": {"backend": "llm", "provider": "openai", "model": "gpt-4o-mini"}, "generator": {}})
    from evosyn.envs.packs import get_domain

    ctx = Ctx.for_run(cfg, "r", 2, get_domain("telecom"))
    assert (ctx.store.root, ctx.run_id, ctx.round, ctx.seed) == (tmp_path, "r", 2, 4)
    assert ctx.domain == "telecom" and ctx.pack is ctx.env.pack  # the environment handed in, never a name
    assert ctx.llm_roles == {"planner": cfg.roles["planner"]}  # the embedded generator is no LLM role
    assert all(isinstance(rc, RoleConfig) for rc in ctx.llm_roles.values())


def test_stage_tasks_neither_hash_their_inputs_nor_persist_results():
    """The store's chunks resume a stage: Prefect computes no cache key (it would serialize every blueprint,
    task and trajectory passed in) and writes no result file."""
    from prefect.cache_policies import NO_CACHE

    tasks = [c for c in _prefect_callables() if c.name != "evosyn-round"]
    assert {t.name for t in tasks} == {"design", "plan", "generate", "rollout", "verify", "dedup", "train",
                                       "evaluate", "reflect", "serve", "trials"}
    for t in tasks:
        assert t.cache_policy is NO_CACHE and t.persist_result is False, t.name
