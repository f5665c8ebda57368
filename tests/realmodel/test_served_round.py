"""A served-learner round with a real model as the learner (SmolLM2-135M on llama.cpp, the suite's own server on
127.0.0.1): `learner: served`, `train: none`. The run completes; the model's evaluations on the probe and test sets
are stored with its calls; the probes the Reflector reads name the slices it failed (a 135M model fails most: expected)."""
from __future__ import annotations

import pytest

from tests.realmodel.conftest import evosyn_cli

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]


def config(tmp_path, model) -> str:
    path = tmp_path / "served.yaml"
    path.write_text("domain: airline\nrounds: 1\nbudget: 4\nseed: 0\ntest_size: 1\nprobe_size: 3\nchunk_size: 4\n"
                    f"learner: served\nserved: {{base_url: '{model.base_url}', model: {model.model}, "
                    "tool_calls: prompt, max_steps: 3, max_tokens: 64, max_concurrency: 1, timeout_s: 300}\n")
    return str(path)


@pytest.mark.timeout(1500)  # a hang guard, not a speed target
def test_a_served_round_evaluates_the_real_model_and_reflects_on_its_failures(tmp_path, real_model):
    from evosyn.storage.store import Store

    home = tmp_path / "home"
    res = evosyn_cli(tmp_path, home, "run", "--quiet", "--config", config(tmp_path, real_model))
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    store = Store(home, create=False)
    run_id = next(r.run_id for r in store.read_records("runs") if not r.run_id.startswith("testset-"))
    evaluations = store.read_records("evaluations", run_id=run_id)
    sets = {e.task_set for e in evaluations}
    assert {"probe", "test", "test_uniform"} <= sets, sets
    assert all(e.model_version.split("/")[-1].startswith("served-") for e in evaluations)
    calls = [c for c in store.read_records("llm_calls", run_id=run_id) if c.role == "agent"]
    assert calls and all(c.model == real_model.model for c in calls)
    assert sum(not c.cache_hit for c in calls) > 0 and all(c.input_tokens > 0 for c in calls if not c.cache_hit)
    # the Reflector's evidence: the probes it read, each bucket of a task property with the model's failure rate
    probes = store.read_records("probes", run_id=run_id)
    failed = [(p.probe, b.bucket, b.failure_rate) for p in probes for b in p.buckets
              if b.count and b.failure_rate is not None and b.failure_rate > 0]
    assert failed, "the Reflector's inputs name no slice the model failed"
    assert len(store.read_records("reflections", run_id=run_id)) == 1
    print(f"\nSmolLM2 as the served learner: {len(evaluations)} evaluations, success "
          f"{sum(e.success for e in evaluations)}/{len(evaluations)}; failed slices (probe=bucket: failure rate): "
          + ", ".join(f"{p}={b}: {r:.2f}" for p, b, r in failed[:8]))
