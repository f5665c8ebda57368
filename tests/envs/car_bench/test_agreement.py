"""Agreement with CAR-bench's own reward code on our fixture's gold and perturbed trajectories.

``data/agreement.jsonl`` holds our trajectories (``envs.car_bench.perturb.trajectories``)
with the reward and components that CAR-bench's ``Env.calculate_reward`` gave
them, run unmodified from the public fork in a scratch environment outside the
project (``data/carbench_score.py`` says how); only the rule and tool-error
codes of its findings are kept. The LLM policy judge answered "followed" there
(LLM-POL rules are not machine-checked), so the policy component compares the
AUT-POL rules alone.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.car_bench.reward import reward
from storage.records import Message

ROWS = [json.loads(line) for line in (Path(__file__).parent / "data" / "agreement.jsonl").read_text().splitlines()]
COMPONENTS = {"r_actions_final": "r_actions_final", "r_actions_intermediate": "r_actions_intermediate",
              "r_tool_subset": "r_tool_subset", "r_tool_execution": "r_tool_execution", "r_policy": "r_policy",
              "r_user_end": "r_user_end_conversation"}


def _bool(value):
    return None if value is None else bool(value)


@pytest.fixture(scope="module")
def scored(car):
    out = []
    for row in ROWS:
        task = car.official_task(row["task_id"])
        out.append((row, reward(car, task, [Message.model_validate(m) for m in row["messages"]])))
    return out


def test_the_set_covers_every_task_and_perturbation(car):
    assert {r["task_id"] for r in ROWS} == {t.id for t in car.tasks()}
    assert {r["kind"] for r in ROWS} >= {"gold", "write_dropped", "argument_changed", "extra_write", "read_dropped",
                                         "refused_call", "reordered_reply", "failure_keyword", "removed_part_used"}


def test_reward_and_components_equal_carbench(scored):
    disagreements = []
    for row, ours in scored:
        theirs = row["carbench"]
        mine = {"reward": ours.reward, **{k: getattr(ours, k) for k in COMPONENTS}}
        expected = {"reward": theirs["reward"], **{k: _bool(theirs[v]) for k, v in COMPONENTS.items()}}
        if mine != expected:
            disagreements.append((row["task_id"], row["kind"], mine, expected))
    assert not disagreements


def test_the_same_rules_fire(scored):
    for row, ours in scored:
        assert sorted(v[:11] for v in ours.policy_errors) == sorted(row["carbench"]["policy_codes"])
        assert len(ours.tool_execution_errors) == len(row["carbench"]["tool_error_codes"])


def test_gold_passes_and_every_perturbation_fails_one_of_our_checks(scored):
    for row, ours in scored:
        if row["kind"] == "gold":
            assert row["carbench"]["reward"] == ours.reward == 1.0
        else:
            assert ours.failed, (row["task_id"], row["kind"])
