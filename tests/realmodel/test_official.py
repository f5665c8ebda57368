"""tau2's official split with the real model as the user simulator, on 2 tasks (issue 16)."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]

RUN = "realmodel-official"


@pytest.mark.timeout(240)
def test_the_official_split_with_the_real_model_playing_the_user(tmp_path, real_model):
    from agents.designer import ColdStart
    from envs.ontology import load_initial_space
    from flows.cli import main
    from pipeline.learn import train_round
    from pipeline.stages import Ctx
    from pipeline.synthesis import run_pass
    from storage.store import Store

    store = Store(tmp_path / "h")
    run_pass(Ctx(store, RUN, 0, 3, "airline"), load_initial_space("airline", run_id=RUN), ColdStart(), 24)
    learner, _, _ = train_round(store, RUN, 0)
    assert learner.n_trajectories > 0
    result = CliRunner().invoke(main, [
        "--home", str(store.root), "evaluate", "--official", "--domain", "airline", "--split", "test",
        "--run", RUN, "--round", "0", "--agent", "embedded", "--user", f"openai_compatible:{real_model.model}",
        "--user-base-url", real_model.base_url, "--max-tasks", "2", "--max-steps", "5", "--quiet"],
        env={"OPENAI_API_KEY": "sk-local-not-a-key"})
    assert result.exit_code == 0, (result.output, result.exception)
    rows = [e for e in store.read_records("evaluations", run_id=RUN) if e.task_set == "official:test"]
    assert len(rows) == 2 and all(0.0 <= e.reward <= 1.0 for e in rows)
    assert re.search(r"pass\^k k=1: [01]\.\d{3}", result.stdout)
    # the real model played the user: its calls are rows of their own, each with a status
    calls = store.read_records("llm_calls", run_id=RUN)
    assert calls and all(c.role == "user" and c.status in ("ok", "invalid", "retry", "error") for c in calls)
    assert any(c.status == "ok" for c in calls)
    user_turns = [m for t in store.read_records("trajectories", run_id=RUN) if t.producer == "learner"
                  for m in t.messages if m.role == "user"]
    assert len(user_turns) >= 2
