"""One LLM-backed synthesis round with every role on the real model (SmolLM2-135M on llama.cpp, 127.0.0.1).

A 135M model gets most structured replies wrong (unknown keys and values, plans that break hard constraints,
tool calls that name no tool): every such reply must be rejected with its reason, recorded in `llm_calls`,
asked again within `max_invalid_retries`, and the round must still finish with whatever verified.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.prefect_home import PREFECT_HOME

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]

ROLES = ("designer", "planner", "generator", "teacher", "user", "repair", "reflector")


def config(tmp_path, model) -> str:
    def role(name: str) -> str:
        # SmolLM2's template has no tool calls; 4 model calls per rollout bound a conversation that never ends
        extra = ", tool_calls: prompt, max_steps: 4" if name == "teacher" else ""
        return (f"  {name}: {{provider: openai_compatible, model: {model.model}, base_url: '{model.base_url}', "
                f"max_tokens: 64, max_invalid_retries: 1, max_retries: 1, timeout_s: 120, max_concurrency: 1"
                f"{extra}}}\n")

    path = tmp_path / "realmodel.yaml"
    path.write_text("domain: airline\nrounds: 1\nbudget: 2\nseed: 0\ntest_size: 2\nchunk_size: 2\nconcurrency: 1\n"
                    "backend: llm\nroles:\n" + "".join(role(r) for r in ROLES))
    return str(path)


@pytest.mark.timeout(600)  # a hang guard, not a speed target: 153 s on one 2-core machine, ~1.7x on a slower one
def test_a_round_on_the_real_model_rejects_records_and_finishes(tmp_path, real_model):
    from storage.store import Store

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update({"EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME, "NO_PROXY": "*",
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"})
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "flows.cli", "run", "--backend", "llm", "--quiet", "--config",
                          config(tmp_path, real_model)], env=env, capture_output=True, text=True, timeout=570,
                         cwd=tmp_path)
    took = time.perf_counter() - t0
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])

    store = Store(home, create=False)
    runs = [r for r in store.read_records("runs") if not r.run_id.startswith("testset-")]
    assert [r.status for r in runs] == ["finished"]
    calls = store.read_records("llm_calls")
    by_role = {c.role for c in calls}
    assert {"designer", "planner", "reflector"} <= by_role, by_role  # the stages that always ask a model
    assert all(c.model == real_model.model and c.input_tokens > 0 for c in calls if c.status in ("ok", "invalid"))
    invalid = [c for c in calls if c.status == "invalid"]
    assert invalid, "a 135M model got every reply right: the suite no longer tests rejection"
    assert all(c.error for c in invalid)  # each rejection is recorded with its reason ...
    reasked = {(c.role, c.request_hash) for c in calls if c.attempt > 0}
    assert reasked, "no invalid reply was asked again"  # ... and asked again within the bound
    assert max(c.attempt for c in calls) <= 1  # max_invalid_retries: 1
    print(f"\nrealmodel round: {took:.1f}s, {len(calls)} calls ({len(invalid)} invalid) by {sorted(by_role)}")
