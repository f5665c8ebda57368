"""Prefect-native results: a real run's round publishes its metrics table and its report markdown to its flow
run, the run a summary table, and the stage tasks log what they did; all read back through the Prefect client."""
from __future__ import annotations

import time

import json

import pytest

from evosyn.flows.artifacts import artifact_key, round_keys

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

RUN_CFG = {"domain": "airline", "rounds": 1, "budget": 16, "test_size": 20, "chunk_size": 4, "seed": 5}


def test_keys_are_what_prefect_accepts():
    assert artifact_key("round", 1, "metrics", "Airline_evosyn.s0/AB12") == "round-1-metrics-airline-evosyn-s0-ab12"
    assert round_keys("retail-static-s2-0f0f0f", 3) == ("round-3-metrics-retail-static-s2-0f0f0f",
                                                        "round-3-report-retail-static-s2-0f0f0f")


def _data(artifact):
    return json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data


@pytest.mark.slow
def test_a_round_publishes_its_table_and_markdown_artifacts(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowFilter,
        FlowFilterName,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.testing.utilities import prefect_test_harness

    from evosyn.flows.run import evosyn_run
    from evosyn.config import RunConfig
    from evosyn.storage.store import Store

    cfg = RunConfig(**RUN_CFG, store={"root": str(tmp_path / "home")})
    with prefect_test_harness(server_startup_timeout=180):
        summary = evosyn_run(cfg)
        run_id = summary.run_id
        with get_client(sync_client=True) as client:
            def runs_of(flow):
                return client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow])))

            (round_run,), (run_run,) = runs_of("evosyn-round"), runs_of("evosyn-run")

            def artifacts(flow_run):
                found = client.read_artifacts(artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run.id])))
                return {a.key: a for a in found}

            on_round, on_run = artifacts(round_run), artifacts(run_run)
            # the round flow run's own logs and its task runs' (each carries the flow run's id); logs reach the
            # API through a background worker, so the last ones may land after the run returns
            deadline = time.monotonic() + 60
            while True:
                logs = [entry.message for entry in client.read_logs(LogFilter(
                    flow_run_id=LogFilterFlowRunId(any_=[round_run.id])), limit=200)]
                if any(m.startswith("evaluate test: ") for m in logs) or time.monotonic() > deadline:
                    break
                time.sleep(1)

    table_key, md_key = round_keys(run_id, 1)
    assert set(on_round) == {table_key, md_key}
    assert on_round[table_key].type == "table" and on_round[md_key].type == "markdown"
    metrics = {row["metric"]: row["value"] for row in _data(on_round[table_key])}
    want = summary.rounds[0]
    for name in ("verified_yield", "success_test", "success_diagnostic", "factor_coverage", "space_version"):
        assert metrics[name] == pytest.approx(want[name], abs=1e-4), name

    store = Store(tmp_path / "home", create=False)
    md = on_round[md_key].data
    (reflection,) = store.read_records("reflections", run_id=run_id)
    directions = store.read_records("directions", run_id=run_id)
    space = store.read_records("spaces", run_id=run_id, round=1)[0]
    verified = len({v.task_id for v in store.read_records("verdicts", run_id=run_id) if v.passed})
    assert f"# Round 1 of `{run_id}`" in md
    assert f"verified {verified}/16 blueprints" in md
    assert "## Space" in md and (f"-> v{space.version}" in md if space.version > 1 else "v1, no change." in md)
    assert "## Reflector" in md and f"**Decision:** {reflection.summary}" in md
    assert all(r.dimension in md for r in reflection.dimension_reviews)
    assert "## Designer" in md and f"{len(directions)} directions, 16 blueprints" in md
    assert all(d.objective.replace("|", "\\|") in md for d in directions)
    assert f"| verify | {verified} | 16 |" in md  # the stage table: kept of its input

    (summary_key,) = on_run
    assert summary_key == f"run-summary-{run_id}" and on_run[summary_key].type == "table"
    assert [row["round"] for row in _data(on_run[summary_key])] == [1]

    # the round's flow run says what each stage did; its tasks say what each chunk did
    assert f"verify: {verified}/16 kept" in logs, logs
    assert "plan: 16/16 planned" in logs
    assert len([m for m in logs if m.startswith("generate: ") and m.endswith("/4 built")]) == 4  # one per chunk
    assert any(m.startswith("evaluate test: ") and " on " in m for m in logs)
