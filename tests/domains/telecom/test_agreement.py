"""Our verifier vs tau2's own evaluator on synthesized telecom tasks and perturbed copies (slow).

Every family x outcome contributes teacher solutions; every perturbation of each
(including a dropped device action) is scored by both. Rewards must be equal,
and every perturbation that tau2's reward lets pass must still fail one of our
checks: our state check compares the agent DB and the phone.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest

from evosyn.agents.plans import Infeasible
from evosyn.agents.teacher import EmbeddedTeacher
from evosyn.envs.perturb import KINDS, perturb
from evosyn.envs.verify import run_checks
from tests.domains.telecom.conftest import FAMILIES, selection, synth_task

pytestmark = pytest.mark.slow


def _tau2(args):
    from evosyn.envs.tau2.official_eval import tau2_reward

    task, messages = args
    return tau2_reward("telecom", task, messages, "user_stop")[0]


def test_synthesized_rewards_equal_tau2_and_false_passes_are_flagged(telecom, generator, monkeypatch):
    from evosyn.domains.telecom.policy import check_write

    from evosyn.envs.packs import get_pack

    assert get_pack("telecom").policy_rules() is check_write  # the verifier's rules, through the registry
    teacher = EmbeddedTeacher(telecom)
    cases = []
    for family in FAMILIES:
        for outcome, writes in (("fulfill", "1"), ("fulfill", "3-4"), ("refuse", "0")):
            for seed in range(2):
                sel = selection(family, outcome, writes)
                try:
                    plan = generator.plan(sel, "bp-agree", seed)
                except Infeasible:
                    continue
                st = synth_task(plan, sel, f"syn-{family}-{outcome}-{writes}-{seed}")
                task, gold = telecom.task_from_json(st.definition), teacher.rollout(st).messages
                cases.append((task, "gold", gold))
                cases.extend((task, k, m) for k in KINDS if (m := perturb(telecom, task, gold, k)) is not None)
    ours = [run_checks(telecom, task, msgs, termination="user_stop") for task, _, msgs in cases]
    with ProcessPoolExecutor(max_workers=2) as pool:
        theirs = list(pool.map(_tau2, [(task, msgs) for task, _, msgs in cases], chunksize=8))
    assert [(t.id, k) for (t, k, _), o, r in zip(cases, ours, theirs) if o.reward != r] == []
    assert all(o.passed and r == 1.0 for (_, k, _), o, r in zip(cases, ours, theirs) if k == "gold")
    dropped = [(o, r) for (_, k, _), o, r in zip(cases, ours, theirs) if k == "device_write_dropped"]
    assert dropped and all(r == 0.0 and not o.passed for o, r in dropped)
    assert not [(t.id, k) for (t, k, _), o in zip(cases, ours) if k != "gold" and o.passed]
    assert {k for _, k, _ in cases} >= set(KINDS)
