"""One LLM-backed synthesis round with every role on the real model (SmolLM2-135M on llama.cpp, 127.0.0.1).

The structured roles' decoding is constrained to their (bounded) JSON schemas, so their replies are JSON of the
schema; a 135M model still gets most of them wrong for the role (unknown keys and values, plans that break hard
constraints, tool calls that name no tool): every such reply must be refused with its reason, recorded in
`llm_calls`, asked again within `max_invalid_retries`, and the round must still finish with whatever verified.
The test prints, per role, the schema-valid and the accepted share, and how far the chain got.
"""
from __future__ import annotations

import time

import pytest

from tests.realmodel.conftest import evosyn_cli

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]

ROLES = ("designer", "planner", "generator", "teacher", "user", "repair", "reflector")
STRUCTURED = ("designer", "planner", "generator", "repair", "reflector")


def config(tmp_path, model) -> str:
    def role(name: str) -> str:
        # SmolLM2's template has no tool calls; 4 model calls per rollout bound a conversation that never ends
        extra = ", tool_calls: prompt, max_steps: 4" if name == "teacher" else ""
        # a structured role's schema, bounded, and room for the JSON it allows (tests/realmodel/test_structured.py)
        room = 512 if name == "generator" else 320
        tokens = f"max_tokens: {room}, schema_max_string: 40, schema_max_items: 2" if name in STRUCTURED \
            else "max_tokens: 64"
        return (f"  {name}: {{provider: openai_compatible, model: {model.model}, base_url: '{model.base_url}', "
                f"{tokens}, max_invalid_retries: 1, max_retries: 1, timeout_s: 300, max_concurrency: 1, "
                f"on_invalid: fallback{extra}}}\n")

    path = tmp_path / "realmodel.yaml"
    path.write_text("domain: airline\nrounds: 1\nbudget: 2\nseed: 0\ntest_size: 2\nchunk_size: 2\nconcurrency: 1\n"
                    "backend: llm\nroles:\n" + "".join(role(r) for r in ROLES))
    return str(path)


@pytest.mark.timeout(1500)  # a hang guard, not a speed target
def test_a_round_on_the_real_model_rejects_records_and_finishes(tmp_path, real_model):
    from evosyn.storage.store import Store

    home = tmp_path / "home"
    t0 = time.perf_counter()
    res = evosyn_cli(tmp_path, home, "run", "--backend", "llm", "--quiet", "--config", config(tmp_path, real_model))
    took = time.perf_counter() - t0
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])

    store = Store(home, create=False)
    runs = [r for r in store.read_records("runs") if not r.run_id.startswith("testset-")]
    assert [r.status for r in runs] == ["finished"]
    calls = store.read_records("llm_calls")
    by_role = {c.role for c in calls}
    assert {"designer", "planner", "reflector"} <= by_role, by_role  # the stages that always ask a model
    assert all(c.model == real_model.model and c.input_tokens > 0 for c in calls if c.status in ("ok", "invalid"))
    # a 135M model's replies are refused: the run goes on (on_invalid: fallback), and says so where a user looks
    fell_back = sorted({c.role for c in calls if c.status == "fallback"})
    if fell_back:
        assert "fell back" in res.stdout + res.stderr, (fell_back, res.stdout[-2000:])
    refused = [c for c in calls if c.status in ("invalid", "rejected")]
    assert refused, "a 135M model got every reply right: the suite no longer tests rejection"
    assert all(c.error for c in refused)  # each refusal is recorded with its reason ...
    reasked = {(c.role, c.request_hash) for c in calls if c.attempt > 0}
    assert reasked, "no refused reply was asked again"  # ... and asked again within the bound
    assert max(c.attempt for c in calls) <= 1  # max_invalid_retries: 1
    lines = []
    for role in [r for r in STRUCTURED if r in by_role]:
        replies = [c for c in calls if c.role == role and c.status in ("ok", "rejected", "invalid")]
        valid = sum(c.status != "invalid" for c in replies) / len(replies)
        lines.append(f"  {role:9s} {len(replies):2d} replies, schema-valid {valid:.2f}, accepted "
                     f"{sum(c.status == 'ok' for c in replies) / len(replies):.2f}")
    # how far the chain got: the first stage with nothing is where a real-model round stops
    chain = {table: len([r for r in store.read_records(table) if not r.run_id.startswith("testset-")])
             for table in ("directions", "blueprints", "tasks", "trajectories")}
    chain["verified"] = len({v.task_id for v in store.read_records("verdicts")
                             if v.passed and not v.run_id.startswith("testset-")})
    stops = next((k for k, n in chain.items() if n == 0), None)
    print(f"\nrealmodel round: {took:.1f}s, {len(calls)} calls ({len(refused)} refused, fell back: {fell_back}) "
          f"by {sorted(by_role)}\n"
          + "\n".join(lines) + f"\n  chain {chain}" + (f": stops at {stops}" if stops else ""))
