"""One filled-in sample of every record type (nested fields populated)."""
from __future__ import annotations

from datetime import datetime, timezone

from evosyn.storage import records as R

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)
LINEAGE = dict(run_id="run-a", round=1, space_version=2, direction_id="d1", blueprint_id="b1")


def samples(**lineage) -> dict[str, R.Record]:
    lin = {**LINEAGE, **lineage}
    msgs = [
        R.Message(role="user", content="Hi, I want to cancel."),
        R.Message(role="assistant", tool_calls=[R.ToolCall(id="c1", name="get_user_details",
                                                            arguments={"user_id": "u_1", "n": [1, 2]})]),
        R.Message(role="tool", content='{"user_id": "u_1"}', tool_call_id="c1", error=False),
    ]
    return {
        "runs": R.Run(**lin, domain="airline", rounds=3, budget=10, config_json='{"a": 1}', created_at=T0),
        "spaces": R.SynthesisSpace(
            **lin, domain="airline", version=2, parent_version=1, created_at=T0,
            factors=[R.Factor(key="num_write", values=["0", "1", "2", "3-4", "5+"], guidance="writes",
                              status="experimental", cardinality=R.Cardinality(min=1, max=1),
                              observable=True, added_in=2)],
            diff=[R.SpaceChange(kind="add_factor", factor="num_write", values=["0", "1"], reason="r",
                                evidence="cmi=0.12")],
            restrictions={"task_family": ["flight_change"]}),
        "directions": R.Direction(**lin, condition_id="c1", objective_type="failure_targeted",
                                  objective="multi-write", preferred_values={"num_write": ["3-4"]},
                                  forbidden_values={"expected_outcome": ["refuse"]},
                                  avoid_patterns=["x"], budget_level="high", n_blueprints=4),
        "blueprints": R.Blueprint(**lin, plan_id="p1", domain="airline",
                                  selected_dimensions={"task_family": ["flight_change"]},
                                  generation_intent="i", success_focus=["a"], diversity_notes=["b"],
                                  expected_difficulty_controls=R.DifficultyControls(
                                      expected_tool_calls="4-5", num_policy_constraints="1",
                                      num_entities="2", requires_clarification=True,
                                      allows_user_false_claim=False, requires_state_change=True)),
        "tasks": R.SynthTask(**lin, task_id="t1", domain="airline",
                             tau2_task={"id": "t1", "evaluation_criteria": {"actions": [{"name": "x"}]}},
                             requested={"num_write": ["1"]}),
        "trajectories": R.Trajectory(**lin, trajectory_id="tr1", task_id="t1", messages=msgs),
        "verdicts": R.Verdict(**lin, verdict_id="v1", task_id="t1", trajectory_id="tr1", reward=1.0,
                              passed=False, checks=[R.CheckResult(name="state", passed=True),
                                                    R.CheckResult(name="policy", passed=False, reason="no confirm")],
                              observed={"num_write": ["1"]}),
        "sft_examples": R.SFTExample(**lin, example_id="e1", task_id="t1", trajectory_id="tr1",
                                     messages=msgs, tools=[{"type": "function", "function": {"name": "x"}}]),
        "evaluations": R.Evaluation(**lin, evaluation_id="ev1", task_id="t1", trajectory_id="tr1",
                                    model_version="m1", task_set="test", success=True, reward=1.0,
                                    num_steps=5, observed={"num_write": ["1"]}, failed_checks=["a"]),
        "feedback": R.Feedback(**lin, feedback_id="f1", model_version="m1", overall_success=0.5,
                               n_evaluated=10, performance=[R.SliceStat(factor="k", value="v", count=3,
                                                                        successes=1, success_rate=1 / 3)]),
        "probes": R.Probe(**lin, probe="num_write", buckets=[R.ProbeBucket(bucket="1", count=3,
                                                                           failure_rate=0.2)],
                          cmi_given_space=0.12, suggested_factor="num_write", suggested_values=["0", "1"]),
        "reflections": R.Reflection(**lin, round_id="r1", synthesis_space_version_in=1,
                                    synthesis_space_version_out=2,
                                    dimension_reviews=[R.DimensionReview(dimension="num_write",
                                                                         decision="promote")],
                                    new_proposals=[R.Proposal(action="promote_probe_to_dimension",
                                                              dimension_name="num_write", values=["1"])]),
        "llm_calls": R.LLMCall(**lin, call_id="l1", role="planner", provider="openai", model="gpt",
                               request_hash="abc", input_tokens=10, output_tokens=5, latency_s=0.2,
                               cost_usd=0.001, created_at=T0),
        "dedup": R.DedupCheck(**lin, task_id="t1", split="train", actions_signature="0123456789abcdef",
                              actions_write=True, duplicate_of="t0", duplicate_round=1, duplicate_jaccard=0.9,
                              duplicate_by=["instruction", "actions"], official_task="5",
                              official_splits=["base", "test"], official_jaccard=1.0,
                              official_by=["instruction", "actions"], flags=["duplicate", "official_test"],
                              flagged=True),
    }
