"""The OpenAI-compatible task agent on the real model, in prompt tool-call mode, scored by the harness."""
from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]


@pytest.mark.timeout(180)
def test_the_openai_agent_on_the_real_model_produces_evaluation_rows(store, real_model):
    from agents.learners.harness import evaluate, run_episode
    from agents.learners.openai_agent import OpenAICompatibleAgent
    from envs.packs import get_domain
    from pipeline.testset import test_cases

    domain = get_domain("airline")
    cases = test_cases(store, "airline", n=3)[:3]
    agent = OpenAICompatibleAgent(base_url=real_model.base_url, model=real_model.model, tool_calls="prompt",
                                  max_tokens=96, retries=1, seed=0)
    t0 = time.perf_counter()
    evaluations, trajectories = evaluate(agent, cases, domain, run_id="realmodel", round=1, task_set="test",
                                         model_version="smollm2-135m", max_steps=4)
    took = time.perf_counter() - t0
    store.write(evaluations, "realmodel")

    rows = store.read_records("evaluations", run_id="realmodel")
    assert sorted(r.task_id for r in rows) == sorted(c.task.task_id for c in cases)
    assert all(r.model_version == "smollm2-135m" and r.task_set == "test" and 0.0 <= r.reward <= 1.0 for r in rows)
    said = [m for t in trajectories for m in t.messages if m.role == "assistant"]
    assert said and all(m.content or m.tool_calls for m in said)  # the model answered every turn
    # the prompt tool-call path ran: calls that validated became tool messages, the others were recorded
    executed = [m for t in trajectories for m in t.messages if m.role == "tool"]
    assert executed or agent.rejected, "the model never attempted a tool call"
    assert all(reason and "\n" not in reason for reason, _ in agent.rejected)

    # deterministic sampling: the same task, the same conversation
    again = run_episode(agent, cases[0].task, domain, max_steps=4, model_version="smollm2-135m")
    assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in trajectories[0].messages]
    print(f"\nrealmodel task agent: {took:.1f}s for {len(cases)} tasks, {len(executed)} tool results, "
          f"{len(agent.rejected)} rejected calls, rewards {[r.reward for r in rows]}")
