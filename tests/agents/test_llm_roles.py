"""LLM-backed roles through the real SDKs against scripted servers on 127.0.0.1."""
from __future__ import annotations

import pytest

from evosyn.agents.designer import ColdStart, DesignError, LLMDesigner
from evosyn.agents.generator import GenerationError, LLMGenerator, candidate_entities
from evosyn.agents.generator_schema import entity_ids
from evosyn.agents.planner import LLMPlanner, PlanError
from evosyn.agents.reflector_llm import LLMReflector, reflector_messages
from evosyn.agents.repair import LLMRepair
from evosyn.agents.roles import RoleInvalid, env_context
from evosyn.agents.teacher import EmbeddedTeacher, LLMTeacher
from evosyn.agents.verifier import verify
from evosyn.benchmarks.fake_llm_server import FakeLLMServer, Script, answer, error
from evosyn.envs.ontology import check_selection
from evosyn.envs.packs import get_domain, get_pack
from evosyn.config import RoleConfig
from evosyn.storage.records import Feedback, Probe, ProbeBucket, SliceStat
from evosyn.benchmarks.llm_script import RoleScript

RUN = dict(run_id="t", round=1)
RULES = get_pack("airline").planner_rules  # the planner rules of the ``space`` fixture's pack


@pytest.fixture(scope="module")
def dom():
    return get_domain("airline")


@pytest.fixture(scope="module")
def env(dom):
    return env_context(dom)


@pytest.fixture(scope="module")
def script():
    return RoleScript(get_domain("airline"))


@pytest.fixture
def serve(monkeypatch, tmp_path):
    """serve(responder, provider) -> a client of the role talking HTTP to a fresh scripted server."""
    from evosyn.agents.llm import make_client

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unit")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-unit")
    servers = []

    def start(respond, role="planner", provider="openai", **settings):
        server = FakeLLMServer(respond).start()
        servers.append(server)
        model = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}.get(provider, "local")
        url = server.anthropic_base_url if provider == "anthropic" else server.base_url
        cfg = RoleConfig(backend="llm", provider=provider, model=model, base_url=url, max_retries=2, **settings)
        client = make_client(role, cfg, cache_dir=tmp_path / f"cache-{len(servers)}", backoff_initial_s=0.01,
                             backoff_max_s=0.02)
        client.server = server
        return client

    yield start
    for s in servers:
        s.stop()


def _directions(script, space, env, client, budget=12):
    return LLMDesigner(client, env).design(space, ColdStart(), budget, seed=0, **RUN)


def _blueprints(script, space, env, serve, n=4):
    dirs = _directions(script, space, env, serve(script, "designer"), budget=n)
    planner = LLMPlanner(serve(script, "planner"), env, rules=RULES)
    return [planner.plan(d, space, None, index=i, seed=0) for d in dirs for i in range(d.n_blueprints)]


# ---------------------------------------------------------------- valid outputs
def test_designer_planner_generator_parse_valid_output(space, env, dom, script, serve):
    dirs = _directions(script, space, env, serve(script, "designer"))
    assert sum(d.n_blueprints for d in dirs) == 12 and len(dirs) == 12
    assert all(d.allowed_values["task_family"][0] in space.factor("task_family").values for d in dirs)
    bps = _blueprints(script, space, env, serve, n=6)
    assert len(bps) == 6 and len({b.blueprint_id for b in bps}) == 6
    assert all(not check_selection(space, b.selected_dimensions) for b in bps)
    gen = LLMGenerator(dom, serve(script, "generator"), env)
    tasks = [gen.generate(b, space) for b in bps]
    assert all(t.generator == "llm" for t in tasks)
    assert all(t.task_id in gen.raw and gen.raw[t.task_id].startswith("{") for t in tasks)  # raw kept
    # the scripted tasks are genuinely valid: the embedded teacher's rollout of each verifies
    teacher = EmbeddedTeacher(dom)
    assert all(verify(t, teacher.rollout(t), dom).passed for t in tasks)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_llm_teacher_and_user_solve_the_task_in_the_environment(space, env, dom, script, serve, provider):
    bps = _blueprints(script, space, env, serve, n=3)
    gen = LLMGenerator(dom, serve(script, "generator"), env)
    tasks = [gen.generate(b, space) for b in bps]
    teacher = LLMTeacher(dom, serve(script, "teacher", provider), serve(script, "user", provider))
    for t in tasks:
        traj = teacher.rollout(t)
        assert traj.termination == "user_stop"
        assert any(m.role == "tool" for m in traj.messages)  # real tool results from the environment
        assert verify(t, traj, dom).passed, [c.reason for c in verify(t, traj, dom).failed()]


def test_teacher_with_the_embedded_reactive_user(space, env, dom, script, serve):
    bps = _blueprints(script, space, env, serve, n=2)
    task = LLMGenerator(dom, serve(script, "generator"), env).generate(bps[0], space)
    traj = LLMTeacher(dom, serve(script, "teacher"), None, max_steps=6).rollout(task)
    assert traj.messages[0].role == "user" and len(traj.messages) > 1


# ---------------------------------------------------------------- invalid outputs: re-asked, then rejected
def _calls(client):
    return [(c.status, c.attempt) for c in client.calls]


def test_malformed_then_valid_is_reasked(space, env, script, serve):
    dirs = _directions(script, space, env, serve(script, "designer"), budget=2)
    client = serve(Script(lambda r: answer(r, '{"domain": "airline", "sel'), default=script))
    bp = LLMPlanner(client, env, rules=RULES).plan(dirs[0], space, None, index=0, seed=0)
    assert bp.selected_dimensions["task_family"] == dirs[0].allowed_values["task_family"]
    assert _calls(client) == [("invalid", 0), ("ok", 1)]
    reask = client.server.requests[1]["body"]["messages"][-1]["content"]
    assert "malformed JSON" in reask  # the model is shown the problem


def test_space_invalid_output_is_reasked_with_the_reason(space, env, script, serve):
    dirs = _directions(script, space, env, serve(script, "designer"), budget=2)

    def off_space(r):
        good = script.planner(next(m["content"] for m in r.body["messages"] if m["role"] == "user"))
        good["selected_dimensions"]["task_family"] = ["time_travel"]
        return answer(r, good)

    client = serve(Script(off_space, default=script))
    LLMPlanner(client, env, rules=RULES).plan(dirs[0], space, None, index=0, seed=0)
    reask = client.server.requests[1]["body"]["messages"][-1]["content"]
    assert "time_travel" in reask and "task_family" in reask
    # the first reply was of its schema, refused by the planner's own rules: its row says so, with the reason
    first, second = client.calls
    assert (first.status, second.status) == ("rejected", "ok") and "time_travel" in first.error


@pytest.mark.parametrize("bad", ["malformed", "truncated", "off_space", "forbidden"])
def test_persistently_invalid_output_becomes_a_recorded_rejection(space, env, script, serve, bad):
    dirs = _directions(script, space, env, serve(script, "designer"), budget=2)

    def reply(r):
        if bad == "malformed":
            return answer(r, "Sure! Here is the blueprint: {")
        good = script.planner(next(m["content"] for m in r.body["messages"] if m["role"] == "user"))
        if bad == "truncated":
            return answer(r, good, truncated=True)
        if bad == "off_space":
            good["selected_dimensions"]["difficulty_profile"] = ["extreme"]
        else:  # schema-valid, in the space, but breaks the direction's hard constraint
            allowed = dirs[0].allowed_values["task_family"][0]
            good["selected_dimensions"]["task_family"] = [v for v in space.factor("task_family").values
                                                          if v != allowed][:1]
        return answer(r, good)

    client = serve(Script(default=reply))
    with pytest.raises(PlanError) as exc:
        LLMPlanner(client, env, retries=2, rules=RULES).plan(dirs[0], space, None, index=0, seed=0)
    assert "invalid output after 3 attempts" in str(exc.value)
    assert len(client.server.requests) == 3
    expect = {"malformed": "malformed JSON", "truncated": "truncated", "off_space": "extreme",
              "forbidden": "allows only"}[bad]
    assert expect in str(exc.value)
    # unusable replies are `invalid`; replies of the schema that the role refused are `rejected`
    status = "invalid" if bad in ("malformed", "truncated") else "rejected"
    assert [c.status for c in client.calls] == [status] * 3 and all(expect in c.error for c in client.calls)


@pytest.mark.parametrize("provider", ["openai_compatible", "openai", "anthropic"])
def test_the_generator_sends_its_schema_closed_by_the_domains_tools(space, env, dom, script, serve, provider):
    """A constraining server gets no open object to fill (each gold action one of the domain's tools, its own
    arguments), bounded where the role says so; OpenAI the same schema, not strict (an intent's ids are
    optional); Anthropic as its answer tool. The good reply parses into a task either way."""
    bps = _blueprints(script, space, env, serve, n=2)
    bounds = {"schema_max_string": 40, "schema_max_items": 3} if provider == "openai_compatible" else {}
    client = serve(script, "generator", provider, **bounds)
    task = LLMGenerator(dom, client, env).generate(bps[0], space)
    assert task.generator == "llm" and verify(task, EmbeddedTeacher(dom).rollout(task), dom).passed
    body = client.server.requests[0]["body"]
    if provider == "anthropic":
        [tool] = body["tools"]
        assert tool["name"] == "GeneratorOut" and body["tool_choice"] == {"type": "tool", "name": "GeneratorOut"}
        schema = tool["input_schema"]
    else:
        fmt = body["response_format"]["json_schema"]
        assert fmt["name"] == "GeneratorOut" and fmt["strict"] is False
        schema = fmt["schema"]
    actions = schema["properties"]["gold_actions"]
    variants = actions["items"]["anyOf"]
    assert [v["properties"]["name"]["enum"] for v in variants] == [[t.name] for t in dom.tools("assistant")]
    assert all(v["properties"]["arguments"]["additionalProperties"] is False for v in variants)
    assert schema["properties"]["intents"]["items"]["properties"]["arguments"]["additionalProperties"] is False
    cancel = next(v for v in variants if v["properties"]["name"]["enum"] == ["cancel_reservation"])
    assert cancel["properties"]["arguments"]["required"] == ["reservation_id"]
    # an id may only be one the prompt shows; a free string is bounded where the role says so (a local server)
    shown = entity_ids(candidate_entities(dom, bps[0]))
    reservation = cancel["properties"]["arguments"]["properties"]["reservation_id"]
    assert reservation["enum"] == shown["reservation_id"] and schema["properties"]["user_id"]["enum"] == \
        shown["user_id"] and "maxLength" not in reservation
    book = next(v for v in variants if v["properties"]["name"]["enum"] == ["book_reservation"])
    bounded = provider == "openai_compatible"  # the role's bounds go to a local server only
    assert (actions.get("maxItems"), book["properties"]["arguments"]["properties"]["origin"].get(
        "maxLength")) == ((3, 40) if bounded else (None, None))


def test_generator_rejects_gold_actions_that_fail(space, env, dom, script, serve):
    bps = _blueprints(script, space, env, serve, n=2)

    def fake_tool(r):
        good = script.generator(next(m["content"] for m in r.body["messages"] if m["role"] == "user"))
        good["gold_actions"][0] = {"name": "teleport_passenger", "arguments": {}}
        return answer(r, good)

    with pytest.raises(GenerationError, match="teleport_passenger"):
        LLMGenerator(dom, serve(Script(default=fake_tool), "generator"), env, retries=1).generate(bps[0], space)

    def bad_id(r):
        good = script.generator(next(m["content"] for m in r.body["messages"] if m["role"] == "user"))
        good["gold_actions"] = [{"name": "get_reservation_details", "arguments": {"reservation_id": "NOPE00"}}]
        return answer(r, good)

    with pytest.raises(GenerationError, match="fails on the database"):
        LLMGenerator(dom, serve(Script(default=bad_id), "generator"), env, retries=0).generate(bps[0], space)


def test_unavailable_model_is_a_rejection_not_a_crash(space, env, script, serve):
    dirs = _directions(script, space, env, serve(script, "designer"), budget=2)
    client = serve(Script(default=lambda r: error(500, "down", retry_after=0.0)))
    with pytest.raises(PlanError, match="LLM unavailable"):
        LLMPlanner(client, env, rules=RULES).plan(dirs[0], space, None, index=0, seed=0)
    assert [c.status for c in client.calls][-1] == "error"  # after one "retry" row per retried attempt
    assert {c.status for c in client.calls[:-1]} <= {"retry"}


def test_designer_rejects_unknown_keys(space, env, serve):
    bad = {"conditions": [{"condition_id": "c0", "objective_type": "exploration", "objective": "x",
                           "allowed_values": {"num_write": ["3-4"]}, "budget_level": "high"}]}
    client = serve(Script(default=lambda r: answer(r, bad)), "designer")
    with pytest.raises(DesignError, match="num_write"):
        LLMDesigner(client, env, retries=1).design(space, ColdStart(), 4, seed=0, **RUN)


# ---------------------------------------------------------------- Reflector
def _feedback(evidence=True):
    return Feedback(feedback_id="f", model_version="m", overall_success=0.5, n_evaluated=40,
                    performance=[SliceStat(factor="task_family", value="flight_change", count=10, successes=3,
                                           success_rate=0.3)],
                    coverage=[SliceStat(factor="task_family", value="flight_change", count=10, coverage=0.2)],
                    with_learner_evidence=evidence, **RUN)


PROBES = [Probe(probe="num_write", buckets=[ProbeBucket(bucket="1", count=30, failure_rate=0.2),
                                            ProbeBucket(bucket="3-4", count=3, failure_rate=0.9)],
                cmi_given_space=0.08, residual_cmi=0.05, coverage_gap=0.9, suggested_factor="num_write",
                suggested_values=["0", "1", "2", "3-4", "5+"], **RUN)]


def _reflection(action="promote_probe_to_dimension", name="num_write", values=("0", "1", "2", "3-4", "5+")):
    return {"round_id": "t/r1", "synthesis_space_version_in": 1, "dimension_reviews": [],
            "new_proposals": [{"action": action, "dimension_name": name, "values": list(values),
                               "reason": "failure-driven", "evidence": "I=0.08"}], "summary": "add num_write"}


def test_reflector_adds_one_probe_factor(space, serve):
    client = serve(Script(default=lambda r: answer(r, _reflection())), "reflector")
    refl, new = LLMReflector(client).reflect(space, _feedback(), PROBES, round=1)
    assert new.version == space.version + 1 and new.factor("num_write").status == "experimental"
    assert refl.steering == "new_factor" and refl.synthesis_space_version_out == new.version
    # what its reviews will compare with: the learner's success on the bucket that failed more (3-4: 0 of 3)
    base = new.factor("num_write").baseline
    assert (base.values, base.tasks, base.successes, base.round) == (["3-4"], 3, 0, 1)
    # the next round's audit package shows it, then and now; the control's withholds it
    now = [PROBES[0].model_copy(update={"in_space": True, "buckets": [
        ProbeBucket(bucket="1", count=30, failure_rate=0.2), ProbeBucket(bucket="3-4", count=10, failure_rate=0.4)]})]
    full = reflector_messages(new, _feedback(), now, round=2)[0]["content"]
    assert "targeted_values" in full and "0/3 (round 1)" in full and "6/10" in full
    assert "0/3 (round 1)" not in reflector_messages(new, _feedback(), now, round=2, evidence=False)[0]["content"]


def test_the_reflector_sends_a_schema_of_what_its_round_allows(space, serve):
    """One proposal at most, naming a probe's suggested factor or an experimental factor; a review per
    experimental factor at most, naming one: a constraining server cannot write more than the round allows
    (a 135M model filled two bounded proposals and reviews past max_tokens=320 in a real round)."""
    client = serve(Script(default=lambda r: answer(r, _reflection())), "reflector", "openai_compatible",
                   schema_max_string=40, schema_max_items=2)
    _, new = LLMReflector(client).reflect(space, _feedback(), PROBES, round=1)
    LLMReflector(client, fail=False).reflect(new, _feedback(), [], round=2)  # the same reply: refused, kept
    first, second = (r["body"]["response_format"]["json_schema"] for r in client.server.requests[:2])
    assert first["name"] == second["name"] == "ReflectorOut" and first["strict"] is True
    reviews, proposals = (first["schema"]["properties"][k] for k in ("dimension_reviews", "new_proposals"))
    assert reviews["maxItems"] == 0 and proposals["maxItems"] == 1
    assert proposals["items"]["properties"]["dimension_name"]["enum"] == ["", "num_write"]
    reviews = second["schema"]["properties"]["dimension_reviews"]  # num_write is experimental now
    assert reviews["maxItems"] == 1 and reviews["items"]["properties"]["dimension"]["enum"] == ["num_write"]
    assert second["schema"]["properties"]["summary"]["maxLength"] == 40  # the role's bounds still apply


@pytest.mark.parametrize("bad,reason", [
    (_reflection(name="task_family", values=("a", "b")), "already a factor"),
    (_reflection(name="mood_of_user", values=("calm", "angry")), "probe's suggested factor"),
    ({**_reflection(), "new_proposals": _reflection()["new_proposals"] * 2}, "at most one"),
    ({**_reflection(action="no_change"), "dimension_reviews": [
        {"dimension": "task_family", "decision": "deprecate", "reason": "x"}]}, "only review experimental"),
    (_reflection(action="add_value", name="expected_outcome", values=("escalate",)), "seed factor"),
])
def test_reflector_never_touches_seed_factors_and_adds_at_most_one(space, serve, bad, reason):
    """Rejected after its re-ask: the run stops in one line (on_invalid: fail, the default), or the space is kept
    with a warning and a fallback row (on_invalid: fallback); never a crash, never silent."""
    client = serve(Script(default=lambda r: answer(r, bad)), "reflector")
    with pytest.raises(RoleInvalid, match=reason):
        LLMReflector(client, retries=1).reflect(space, _feedback(), PROBES, round=1)
    assert len(client.server.requests) == 2
    refl, new = LLMReflector(client, retries=1, fail=False).reflect(space, _feedback(), PROBES, round=1)
    assert new.version == space.version and new.factors == space.factors  # kept, not crashed
    assert "rejected" in refl.summary and reason in refl.summary and "warning: reflector fell back" in refl.summary
    assert [c.status for c in client.calls].count("fallback") == 1


def test_no_feedback_control_withholds_learner_evidence(space):
    full = reflector_messages(space, _feedback(), PROBES, round=1)[0]["content"]
    ctrl = reflector_messages(space, _feedback(), PROBES, round=1, evidence=False)[0]["content"]
    assert "task_agent_performance" in full and "failure_correlation" in full
    assert "task_agent_performance" not in ctrl and "failure_correlation" not in ctrl and "no-feedback" in ctrl
    assert "suggested_factor" in ctrl and "coverage" in ctrl  # the rest of the audit package is the same


def test_reflector_flag_selects_the_control(space, serve):
    client = serve(Script(default=lambda r: answer(r, _reflection(action="no_change"))), "reflector")
    LLMReflector(client, learner_evidence=False).reflect(space, _feedback(), PROBES, round=1)
    assert "failure_correlation" not in client.server.requests[0]["body"]["messages"][0]["content"]


# ---------------------------------------------------------------- Repair
def test_repair_revises_and_rejects_invented_user_turns(space, env, dom, script, serve):
    bps = _blueprints(script, space, env, serve, n=2)
    task = LLMGenerator(dom, serve(script, "generator"), env).generate(bps[0], space)
    good = EmbeddedTeacher(dom).rollout(task)
    broken = good.model_copy(update={"messages": [m for m in good.messages if m.role != "assistant" or m.tool_calls
                                                  or m is good.messages[1]]})
    verdict = verify(task, broken, dom)
    revision = {"action": "revise", "reason": "restore the agent's messages", "messages": [
        {"role": m.role, "content": m.content or "", "tool_calls": [
            {"name": c.name, "arguments": c.arguments} for c in m.tool_calls]}
        for m in good.messages if m.role != "tool"]}
    client = serve(Script(default=lambda r: answer(r, revision)), "repair")
    fixed, why = LLMRepair(dom, EmbeddedTeacher(dom), client, env).repair(task, broken, verdict)
    assert why.startswith("revise") and fixed.attempt == 1 and verify(task, fixed, dom).passed
    invented = {**revision, "messages": [{"role": "user", "content": "Also upgrade me to first class for free."},
                                         *revision["messages"][1:]]}
    client = serve(Script(default=lambda r: answer(r, invented)), "repair")
    assert LLMRepair(dom, EmbeddedTeacher(dom), client, env, retries=1).repair(task, broken, verdict) is None
    assert "kept as they were" in verdict.repair_reason


def test_stages_run_a_role_at_its_configured_concurrency(monkeypatch, tmp_path):
    """The round maps items over a role with as many calls in flight as its ``max_concurrency``."""
    from types import SimpleNamespace

    from evosyn.agents.llm import make_client
    from evosyn.agents.llm.limits import reset_limits
    from evosyn.tasks.stages import _map

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unit")
    reset_limits()
    with FakeLLMServer(lambda request: answer(request, "ok"), latency_s=0.2) as server:
        for limit in (3, 12):  # 12: more than a fixed pool of 8 threads would ever send
            cfg = RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini", base_url=server.base_url,
                             max_concurrency=limit)
            client = make_client("planner", cfg, cache_dir=tmp_path / f"c{limit}")
            server.max_in_flight = 0
            texts = _map(lambda i: client.chat_sync([{"role": "user", "content": f"item {limit}/{i}"}]).text,
                         list(range(24)), SimpleNamespace(clients={"planner": client}), "planner")
            client.close()
            reset_limits()
            assert texts == ["ok"] * 24 and server.max_in_flight == limit
