"""Our verifier vs tau2's own evaluator on synthesized tasks of every domain, and perturbed copies (slow).

One pass of the pipeline (the round's stages, embedded roles, ``num_write`` in the
space) per domain; every kept trajectory and each of its perturbations is scored
by both verifiers. Rewards must be equal, gold trajectories pass both, and every
perturbation fails at least one of our checks (a perturbation tau2's reward lets
through, such as an extra write it has no assertion for, is caught by our state,
action or policy checks).
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_domain
from evosyn.envs.perturb import KINDS, perturb
from evosyn.envs.verify import run_checks
from evosyn.tasks.datasets import with_count_factors
from evosyn.tasks.stages import Ctx
from evosyn.tasks.synthesis import run_pass
from evosyn.storage.store import Store

pytestmark = pytest.mark.slow
PER_DOMAIN = 24  # kept trajectories per domain; each gives up to len(KINDS) perturbed copies


def _tau2(args):
    from evosyn.envs.tau2.official_eval import tau2_reward

    domain, task, messages, termination = args
    return tau2_reward(domain, task, messages, termination)[0]


@pytest.mark.parametrize("name", ["airline", "retail", "telecom"])
def test_synthesized_rewards_equal_tau2_and_perturbations_fail(tmp_path, name):
    dom = get_domain(name)
    space = with_count_factors(load_initial_space(dom.pack, run_id=f"agree-{name}"), ("num_write",))
    result = run_pass(Ctx(Store(tmp_path), space.run_id, 0, 7, get_domain(name)), space, ColdStart(), 40)
    cases = []
    for kept in result.kept[:PER_DOMAIN]:
        task, gold = dom.task_from_json(kept.task.definition), kept.trajectory.messages
        stop = kept.trajectory.termination
        cases.append((task, "gold", gold, stop))
        cases.extend((task, k, m, stop) for k in KINDS if (m := perturb(dom, task, gold, k)) is not None)
    assert len({c[0].id for c in cases}) == PER_DOMAIN
    ours = [run_checks(dom, task, msgs, termination=stop) for task, _, msgs, stop in cases]
    with ProcessPoolExecutor(max_workers=2) as pool:
        theirs = list(pool.map(_tau2, [(name, t, m, s) for t, _, m, s in cases], chunksize=8))
    assert [(t.id, k, o.reward, r) for (t, k, _, _), o, r in zip(cases, ours, theirs) if o.reward != r] == []
    assert all(o.passed and r == 1.0 for (_, k, _, _), o, r in zip(cases, ours, theirs) if k == "gold")
    assert [(t.id, k) for (t, k, _, _), o in zip(cases, ours) if k != "gold" and o.passed] == []
    assert sum(k != "gold" for _, k, _, _ in cases) >= 2 * PER_DOMAIN
