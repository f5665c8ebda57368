"""The OpenAI-compatible task agent on the real model, in prompt tool-call mode, scored by the harness."""
from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]


@pytest.mark.timeout(180)
def test_the_openai_agent_on_the_real_model_produces_evaluation_rows(store, real_model):
    from evosyn.agents.learners.harness import evaluate, run_episode
    from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent
    from evosyn.envs.packs import get_domain
    from evosyn.tasks.testset import test_cases

    domain = get_domain("airline")
    cases = test_cases(store, get_domain("airline"), n=3)[:3]
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
    # calls that validated became tool messages; the others were recorded with their reason (with the airline
    # policy in its context, SmolLM2-135M mostly answers in prose: the direct probe below asks for a call)
    executed = [m for t in trajectories for m in t.messages if m.role == "tool"]
    assert all(reason and "\n" not in reason for reason, _ in agent.rejected)

    # the same task again: the same opening from the (scripted) user, and the model answers again. Not the same
    # words: greedy sampling, but llama.cpp's prompt cache reuses whatever prefix the last request left in the
    # slot, and a prefix computed in other batches gives other floating-point sums (--no-cache-prompt would
    # make reruns identical and every request recompute a 4k-token prompt: about 9 s each here)
    again = run_episode(agent, cases[0].task, domain, max_steps=4, model_version="smollm2-135m")
    assert again.messages[0].model_dump() == trajectories[0].messages[0].model_dump()
    assert any(m.role == "assistant" and (m.content or m.tool_calls) for m in again.messages)
    print(f"\nrealmodel task agent: {took:.1f}s for {len(cases)} tasks, {len(executed)} tool results, "
          f"{len(agent.rejected)} rejected calls, rewards {[r.reward for r in rows]}")


@pytest.mark.timeout(120)
def test_a_prompt_mode_call_from_the_real_model_is_read_validated_and_recorded(real_model):
    """With a short context the model does write a JSON call: it is parsed and checked against the offered tools."""
    from evosyn.agents.llm import LLMOutputError, make_client
    from evosyn.envs.packs import get_domain
    from evosyn.config import RoleConfig

    tools = [t.openai_schema() for t in get_domain("airline").tools("assistant")]
    client = make_client("teacher", RoleConfig(backend="llm", provider="openai_compatible", model=real_model.model,
                                               base_url=real_model.base_url, tool_calls="prompt", max_tokens=128),
                         cache=False)
    msgs = [{"role": "system", "content": "You are an airline customer service agent."},
            {"role": "user", "content": "Show me the details of user sara_doe_496."}]
    try:
        result = client.chat_sync(msgs, tools=tools)
    except LLMOutputError as exc:  # a call that is not valid (or truncated): recorded with its reason and raw reply
        assert client.calls[-1].status == "invalid" and client.calls[-1].error == str(exc)
        assert '"name"' in exc.raw, (str(exc), exc.raw)  # it did attempt a call
    else:
        assert client.calls[-1].status == "ok"
        assert result.tool_calls and result.tool_calls[0].name in {t["function"]["name"] for t in tools}, result
