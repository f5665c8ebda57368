"""No silent fallback: a configured LLM role whose replies stay invalid stops the run in one line
(``on_invalid: fail``, the default) or goes on with a warning in the stage's line and a ``fallback`` row in
``llm_calls`` (``on_invalid: fallback``). Against a scripted server on 127.0.0.1 that only talks nonsense."""
from __future__ import annotations

import pytest

from evosyn.agents.designer import ColdStart
from evosyn.agents.roles import RoleInvalid
from evosyn.benchmarks.fake_llm_server import FakeLLMServer, answer
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.config import RoleConfig
from evosyn.storage.store import Store
from evosyn.tasks import stages
from evosyn.envs.packs import get_domain

KEY = "sk-test-ON-INVALID-0000"


@pytest.fixture
def nonsense():
    with FakeLLMServer(lambda request: answer(request, "this is not JSON at all")) as server:
        yield server


def _ctx(tmp_path, server, role, on_invalid):
    llm = {role: RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini", base_url=server.base_url,
                            max_invalid_retries=1, on_invalid=on_invalid)}
    return stages.Ctx(Store(tmp_path / "home"), "inv", 1, 0, llm_roles=llm, env=get_domain("airline"))


def _statuses(ctx, role):
    return sorted(c.status for c in ctx.store.read_records("llm_calls", run_id="inv") if c.role == role)


def test_a_designer_whose_replies_stay_invalid_stops_the_stage_in_one_line(tmp_path, monkeypatch, nonsense):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ctx = _ctx(tmp_path, nonsense, "designer", "fail")
    with pytest.raises(RoleInvalid) as err:
        stages.design(ctx, load_initial_space(get_pack("airline"), run_id="inv"), ColdStart(), 6, "evosyn")
    line = str(err.value)
    assert "\n" not in line and line.startswith("designer:") and "on_invalid: fallback" in line
    assert _statuses(ctx, "designer") == ["invalid", "invalid"]  # its calls are kept, counted as invalid
    assert not ctx.done("design", "x")


def test_a_designer_that_falls_back_says_so_in_its_line_and_in_llm_calls(tmp_path, monkeypatch, nonsense):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ctx = _ctx(tmp_path, nonsense, "designer", "fallback")
    events = []
    space = load_initial_space(get_pack("airline"), run_id="inv")
    dirs = stages.design(ctx, space, ColdStart(), 6, "evosyn", emit=events.append)
    assert dirs and all(d.rationale.startswith("embedded fallback") for d in dirs)
    assert "warning: designer fell back" in events[-1].detail
    assert _statuses(ctx, "designer") == ["fallback", "invalid", "invalid"]
    again = []  # a resume reads the directions back and warns again
    assert stages.design(ctx, space, ColdStart(), 6, "evosyn", emit=again.append) == dirs
    assert "warning: designer fell back" in again[-1].detail
    assert _statuses(ctx, "designer").count("fallback") == 1


@pytest.mark.parametrize("on_invalid", ["fail", "fallback"])
def test_a_per_item_role_with_only_invalid_replies_stops_or_warns(tmp_path, monkeypatch, nonsense, on_invalid):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ctx = _ctx(tmp_path, nonsense, "planner", on_invalid)
    space = load_initial_space(get_pack("airline"), run_id="inv")
    directions = stages.design(stages.Ctx(ctx.store, "inv", 1, 0, get_domain("airline")), space, ColdStart(), 3, "evosyn")
    if on_invalid == "fail":
        with pytest.raises(RoleInvalid, match="planner: .*every reply invalid"):
            stages.plan(ctx, space, directions)
        assert "fallback" not in _statuses(ctx, "planner")
    else:
        assert stages.plan(ctx, space, directions) == []  # every item rejected, and said
        assert _statuses(ctx, "planner").count("fallback") == 1
