"""Agreement with CAR-bench's own reward code on our fixture's gold and perturbed trajectories.

``data/agreement.jsonl`` holds our trajectories (``evosyn.envs.car_bench.perturb.trajectories``)
with the reward and components that CAR-bench's ``Env.calculate_reward`` gave
them, run unmodified from the public fork in a scratch environment outside the
project (``data/carbench_score.py`` says how); only the rule and tool-error
codes of its findings are kept. The LLM policy judge answered "followed" there
(LLM-POL rules are not machine-checked), so the policy component compares the
AUT-POL rules alone.

``data/tool_agreement.jsonl`` checks the tools themselves the same way: random
call sequences with what CAR-bench's own tools answered and did after each call
(``seq_*``: every tool but the scratchpad, the clock and the planner; ``plan_*``:
mostly the planner, whose successful answers are compared whole, by digest).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from evosyn.envs.car_bench.reward import reward
from evosyn.storage.records import Message

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
        elif row["kind"] != "parallel":  # gold calls all in one turn: a variant, not a perturbation
            assert ours.failed, (row["task_id"], row["kind"])
    parallel = [ours.reward for row, ours in scored if row["kind"] == "parallel"]
    assert 0.0 in parallel and 1.0 in parallel  # some rules want a look-up in an earlier turn, most do not


# ------------------------------------------------------------------ tool level
CALLS = [json.loads(line) for line in (Path(__file__).parent / "data" / "tool_agreement.jsonl").read_text().splitlines()]


def _kind(content: str) -> str:
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("status") in ("SUCCESS", "FAILURE"):
        return parsed["status"]
    return "Error" if content.startswith("Error") else "Unknown" if content.startswith("Unknown action") else "text"


def _result_digest(content: str) -> str:
    return hashlib.sha256(json.dumps(json.loads(content)["result"], sort_keys=True).encode()).hexdigest()


def test_the_planner_is_checked_with_and_without_a_plan_id():
    """CAR-bench's planner falls back to the active plan when ``get`` and ``mark_steps`` name none: the set has
    such calls answered SUCCESS, and refusals of each command."""
    planner = [(c["arguments"], theirs["kind"]) for row in CALLS
               for c, theirs in zip(row["calls"], row["carbench"], strict=True) if c["name"] == "planning_tool"]
    for command in ("get", "mark_steps"):
        assert any(a["command"] == command and not a.get("plan_id") and kind == "SUCCESS" for a, kind in planner)
    for command in ("create", "update", "get", "set_active", "mark_steps", "delete", "archive"):
        assert any(a["command"] == command and kind == "FAILURE" for a, kind in planner)


def test_every_tool_call_answers_and_changes_the_state_as_carbench(car):
    """Random call sequences (``data/build_agreement.py``), valid and invalid, on the fixture tasks' contexts: after
    each call, the answer's kind (success, refusal, error), the state's digest and the counts of tool errors and
    policy violations equal what CAR-bench's own tools gave."""
    assert len({c["name"] for row in CALLS for c in row["calls"]}) >= 55
    diverged = []
    for row in CALLS:
        episode = car.episode(car.official_task(row["task_id"]))
        for call, theirs in zip(row["calls"], row["carbench"], strict=True):
            content = episode.step(call["name"], dict(call["arguments"])).content
            kind = _kind(content)
            mine = {"kind": kind, "state": episode.state_digest(), "policy_errors": len(episode.policy_errors),
                    "tool_errors": len(episode.tool_errors)}
            if "result" in theirs:  # the planner: what the agent reads of its plans
                mine["result"] = _result_digest(content) if kind == "SUCCESS" else None
            if mine != theirs:
                diverged.append((row["id"], call["name"], mine, theirs))
                break
    assert not diverged
