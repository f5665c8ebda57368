"""Agreement with tau2's own evaluator on gold trajectories and perturbed copies (slow).

Every official task with gold actions contributes its gold trajectory; airline
contributes every perturbation of every task, retail and telecom every
perturbation of every third task (tau2's evaluator costs ~0.3-1 s per call, so
the full cross product would dominate CI). tau2 runs unmodified, in a pool of
worker processes.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest

from evosyn.envs.gold import gold_messages
from evosyn.envs.perturb import KINDS, perturb
from evosyn.envs.packs import get_domain
from evosyn.envs.verify import run_checks

pytestmark = pytest.mark.slow
STRIDE = {"airline": 1, "retail": 3, "telecom": 3}


def _tau2(args):
    from evosyn.envs.tau2.official_eval import tau2_reward

    domain, task, messages = args
    return tau2_reward(domain, task, messages)[0]


def cases(name):
    dom = get_domain(name)
    tasks = [t for t in dom.tasks("base") if t.gold_actions]
    out = []
    for n, task in enumerate(tasks):
        gold = gold_messages(dom, task)
        out.append((task, "gold", gold))
        if n % STRIDE[name] == 0:
            out.extend((task, kind, m) for kind in KINDS if (m := perturb(dom, task, gold, kind)) is not None)
    return dom, out


@pytest.mark.parametrize("name", ["airline", "retail", "telecom"])
def test_reward_equals_tau2_and_false_passes_are_flagged(name):
    dom, trajectories = cases(name)
    ours = [run_checks(dom, task, msgs) for task, _, msgs in trajectories]
    with ProcessPoolExecutor(max_workers=2) as pool:
        theirs = list(pool.map(_tau2, [(name, task, msgs) for task, _, msgs in trajectories], chunksize=4))
    disagreements = [(t.id, kind, r, o.reward) for (t, kind, _), o, r in zip(trajectories, ours, theirs)
                     if o.reward != r]
    assert not disagreements
    assert all(r == 1.0 for (_, kind, _), r in zip(trajectories, theirs) if kind == "gold")
    # perturbations tau2's reward lets pass are caught by our action or policy checks.
    # telecom's policy has no explicit-confirmation rule, so an extra or reordered write that
    # keeps its env assertions true cannot be flagged there; only airline and retail are held to it.
    if name == "telecom":
        # a dropped device fix breaks the phone: both tau2 and our verifier reject it
        dropped = [(o, r) for (_, kind, _), o, r in zip(trajectories, ours, theirs) if kind == "device_write_dropped"]
        assert dropped and any(r == 0.0 and o.reward == 0.0 for o, r in dropped)
        return
    unflagged = []
    for (task, kind, _), outcome, reward in zip(trajectories, ours, theirs):
        if kind in ("gold", "tampered_observation") or reward != 1.0:
            continue
        failed = {c.name for c in outcome.checks if not c.passed and not c.skipped}
        if not failed & {"actions", "policy"}:
            unflagged.append((task.id, kind))
    assert not unflagged
    assert {kind for _, kind, _ in trajectories} >= {"gold", *KINDS} - {"device_write_dropped"}
