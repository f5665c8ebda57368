"""tau2's official split with the real model as the user simulator, on 2 tasks (issue 16)."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]

RUN = "realmodel-official"


@pytest.mark.timeout(240)
def test_the_official_split_with_the_real_model_playing_the_user(tmp_path, real_model, monkeypatch):
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_domain, get_pack
    from evosyn.tasks.learn import train_round
    from evosyn.tasks.official import evaluate_official, is_success, pass_hat_ks
    from evosyn.tasks.official_agents import build_user, flush_user
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass
    from evosyn.config import RoleConfig
    from evosyn.storage.store import Store

    monkeypatch.setenv("EVOSYN_LOCAL_KEY", "sk-local-not-a-key")
    store = Store(tmp_path / "h")
    run_pass(Ctx(store, RUN, 0, 3, get_domain("airline")), load_initial_space(get_pack("airline"), run_id=RUN), ColdStart(), 24)
    learner, _, _ = train_round(store, RUN, 0, get_domain("airline"))
    assert learner.n_trajectories > 0
    # short replies: a 135M model's customer turns are the cost here (the CLI takes the same role config)
    rc = RoleConfig(backend="llm", provider="openai_compatible", model=real_model.model, base_url=real_model.base_url,
                    api_key_env="EVOSYN_LOCAL_KEY", max_tokens=64, temperature=0.0)
    user = build_user(rc, store.root / "llm_cache")
    result = evaluate_official(store, learner, user, run_id=RUN, round=0, env=get_domain("airline"), split="test",
                               model_version="embedded-r0", trials=1, max_tasks=2, max_steps=3)
    flush_user(user, store, result)

    rows = [e for e in store.read_records("evaluations", run_id=RUN) if e.task_set == "official:test"]
    assert len(rows) == 2 and all(0.0 <= e.reward <= 1.0 for e in rows)
    assert result.pass_hat[1] == pass_hat_ks({e.task_id: [is_success(e.reward)] for e in rows})[1]
    # the real model played the user: each reply is a row with its status; SmolLM2-135M mostly rambles past
    # max_tokens, so most are `invalid` (truncated): recorded with the reason and asked again, never a crash
    calls = store.read_records("llm_calls", run_id=RUN)
    assert len(calls) >= 2 and all(c.role == "user" for c in calls)
    assert all(c.status == "ok" or (c.status in ("invalid", "retry", "error") and c.error) for c in calls)
    if any(c.status == "invalid" for c in calls):
        assert max(c.attempt for c in calls) >= 1  # re-asked
    print(f"\nrealmodel official: {len(calls)} user calls, statuses "
          f"{sorted({c.status for c in calls})}, rewards {[e.reward for e in rows]}")
