"""Malformed model replies are clean rejections on every role's parse-and-validate path (finding 4).

The strategies live in ``benchmarks/fuzz.py`` (``evosyn bench faults`` runs them
3,000 times); here a small example count per role, the named pathologies one
by one, and the whole path over HTTP: the real client, the real role, the
response cache and a rerun.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from evosyn.benchmarks.fuzz import ROLES, body, check, fixture, fuzz
from evosyn.envs.packs import get_domain
from tests.fakes.openai_server import FakeLLMServer, Reply, Script, answer, openai_reply

KEY = "sk-test-FUZZ"
DEEP = "[" * 5000 + "]" * 5000


def _fx():
    """The bench's fixture over the default pack's environment (what `evosyn bench faults` resolves)."""
    return fixture(get_domain("airline"))


@pytest.fixture(scope="module", autouse=True)
def _built():
    _fx()  # the domain and a rolled-out task, once


@pytest.mark.parametrize("role", ROLES)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=__import__("hypothesis").strategies.data())
def test_fuzzed_replies_are_accepted_or_rejected_never_a_crash(role, data):
    fx = _fx()
    outcome = check(fx, role, *data.draw(body(fx, role)))
    assert outcome in ("accepted", "rejected")


def _answer(role: str) -> dict:
    """The role's valid answer (for the teacher: the arguments of its tool call)."""
    valid = _fx().valid[role]
    return valid["arguments"] if role == "teacher" else valid


def _poisoned(role: str, raw: str) -> str:
    """The role's valid answer as JSON text, its first field's value replaced by the raw JSON text ``raw``."""
    valid, mark = _answer(role), "\x00MARK\x00"
    return json.dumps({**valid, next(iter(valid)): mark}).replace(json.dumps(mark), raw)


PATHOLOGIES = {
    "deep_nesting": lambda role: _poisoned(role, DEEP),
    "deep_objects": lambda role: _poisoned(role, '{"a":' * 3000 + "1" + "}" * 3000),
    "nan": lambda role: _poisoned(role, "NaN"),
    "infinity": lambda role: _poisoned(role, "-Infinity"),
    "float_overflow": lambda role: _poisoned(role, "1e999"),
    "huge_int": lambda role: _poisoned(role, "9" * 5000),
    "duplicate_keys": lambda role: "{" + json.dumps(next(iter(_answer(role)))) + ": [], "
                                   + json.dumps(_answer(role))[1:],
    "lone_surrogate": lambda role: _poisoned(role, '"\\ud800"'),
    "huge_string": lambda role: _poisoned(role, json.dumps("x" * 1_000_001)),
    "truncated": lambda role: json.dumps(_answer(role))[:-7],
    "wrong_type": lambda role: "[" + json.dumps(_answer(role)) + "]",
}


# Anthropic hands tool inputs over already decoded: the teacher's pathologies there are body-level (below)
@pytest.mark.parametrize("role, anthropic", [(r, a) for r in ROLES for a in (False, True)
                                             if not (a and r == "teacher")])
@pytest.mark.parametrize("pathology", list(PATHOLOGIES))
def test_each_pathology_is_rejected(role, pathology, anthropic):
    from tests.fakes.anthropic_server import anthropic_reply

    text = PATHOLOGIES[pathology](role)
    if role == "teacher":  # the pathology sits in the tool call's arguments
        reply = openai_reply(None, {"name": _fx().valid["teacher"]["name"], "arguments": text})
    else:
        reply = anthropic_reply(text=text) if anthropic else openai_reply(text)
    assert check(_fx(), role, reply, anthropic) == "rejected"


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("anthropic", [False, True])
def test_the_valid_answer_is_accepted(role, anthropic):
    from tests.fakes.anthropic_server import anthropic_reply

    valid = _fx().valid[role]
    if role == "teacher":
        reply = (anthropic_reply(tool_use={"id": "t", "name": valid["name"], "input": valid["arguments"]})
                 if anthropic else openai_reply(None, valid))
    elif anthropic:
        from evosyn.benchmarks.fuzz import _schema

        reply = anthropic_reply(tool_use={"id": "t", "name": _schema(role).__name__, "input": valid})
    else:
        reply = openai_reply(json.dumps(valid))
    assert check(_fx(), role, reply, anthropic) == "accepted"  # the harness rejects for cause, not always


def test_fuzz_counts_every_reply_per_role():
    crashes = []
    result = fuzz(get_domain("airline"), n=60, on_crash=lambda role, what: crashes.append((role, what)))
    assert set(result) == set(ROLES) and sum(r["replies"] for r in result.values()) == 60
    assert all(r["replies"] == r["accepted"] + r["rejections"] + r["crashes"] for r in result.values())
    assert sum(r["rejections"] for r in result.values()) > 30  # the strategies really break replies
    assert not crashes and all(r["crashes"] == 0 for r in result.values())


# ---------------------------------------------------------------- over HTTP, with the cache and a rerun
def _client(server, role: str, cache_dir):
    from evosyn.agents.llm import make_client
    from evosyn.config import RoleConfig

    rc = RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini", base_url=server.base_url,
                    api_key_env="EVOSYN_TEST_FUZZ_KEY", max_retries=0)
    return make_client(role, rc, cache_dir=cache_dir, backoff_initial_s=0.01, backoff_max_s=0.02)


def _designer(client):
    from evosyn.agents.designer import ColdStart, LLMDesigner
    from evosyn.agents.roles import env_context
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_pack

    space = load_initial_space(get_pack("airline"), run_id="fuzz")
    return LLMDesigner(client, env_context(_fx().domain), retries=3).design(
        space, ColdStart(), 8, run_id="fuzz", round=1, seed=0)


def _reflector(client):
    from evosyn.agents.reflector_llm import LLMReflector
    from evosyn.storage.records import Feedback

    fx = _fx()
    fb = Feedback(run_id="fuzz", round=1, feedback_id="f", model_version="m", overall_success=0.5, n_evaluated=4)
    reflection, space = LLMReflector(client, retries=3).reflect(fx.space, fb, fx.probes, round=1)
    return reflection.model_dump(exclude={"created_at"}), space.version


@pytest.mark.parametrize("role, call", [("designer", _designer), ("reflector", _reflector)])
def test_pathological_replies_are_recorded_reasked_and_replayed_the_same(role, call, tmp_path, monkeypatch):
    """A 5,000-deep reply, then NaN, then a valid answer: the role gets the answer on its third ask;
    a rerun on the same cache replays the same rejections and answer, with rows, and no request."""
    monkeypatch.setenv("EVOSYN_TEST_FUZZ_KEY", KEY)
    valid = _fx().valid[role]
    script = Script(lambda r: answer(r, _poisoned(role, DEEP)), lambda r: answer(r, _poisoned(role, "NaN")),
                    default=lambda r: answer(r, valid))
    with FakeLLMServer(script) as server:
        first = _client(server, role, tmp_path / "cache")
        value = call(first)
        assert server.count == 3
        rerun = _client(server, role, tmp_path / "cache")  # a new process would see the same directory
        again = call(rerun)
        assert server.count == 3 and rerun.http_requests == 0
    assert again == value
    rows = [(c.status, c.attempt, c.cache_hit) for c in first.calls]
    assert rows == [("invalid", 0, False), ("invalid", 1, False), ("ok", 2, False)]
    assert "nested more than" in first.calls[0].error and "NaN is not JSON" in first.calls[1].error
    assert [(c.status, c.attempt, c.cache_hit) for c in rerun.calls] == [
        ("invalid", 0, True), ("invalid", 1, True), ("ok", 2, True)]


def test_a_body_no_decoder_can_read_is_an_output_error(tmp_path, monkeypatch):
    """The HTTP body itself nested 5,000 levels deep: the SDK's decoder overflows; a clean rejection."""
    from evosyn.agents.llm import LLMOutputError

    monkeypatch.setenv("EVOSYN_TEST_FUZZ_KEY", KEY)
    with FakeLLMServer(lambda r: Reply(raw=DEEP.encode())) as server:
        c = _client(server, "planner", None)
        with pytest.raises(LLMOutputError):
            c.chat_sync([{"role": "user", "content": "hi"}])
    assert [r.status for r in c.calls] == ["invalid"] and c.calls[0].transport_attempt == 1


def test_teacher_tool_call_with_pathological_arguments_is_reasked(monkeypatch):
    from evosyn.agents.teacher import LLMTeacher

    monkeypatch.setenv("EVOSYN_TEST_FUZZ_KEY", KEY)
    fx = _fx()
    name = fx.valid["teacher"]["name"]
    script = Script(openai_reply(None, {"name": name, "arguments": '{"a": ' + DEEP + "}"}),
                    openai_reply(None, {"name": name, "arguments": '{"user_id": "\\ud800"}'}),
                    default=openai_reply("Thank you, goodbye."))
    with FakeLLMServer(script) as server:
        c = _client(server, "teacher", None)
        traj = LLMTeacher(fx.domain, c, retries=3, max_steps=1).rollout(fx.task)
    assert [r.status for r in c.calls] == ["invalid", "invalid", "ok"]
    assert [m.content for m in traj.messages if m.role == "assistant"] == ["Thank you, goodbye."]
