"""Telecom with LLM roles (dual control) over HTTP against scripted servers on 127.0.0.1: a synthesis round whose
teacher and user are LLM roles, and an official evaluation with an LLM user, complete tasks that need device
actions; tau2's own evaluator gives every one of those trajectories the reward our verifier gives. An LLM
Generator writes device actions (gold actions of the user's tools) that verify."""
from __future__ import annotations

import pytest

from evosyn.agents.ask import render
from evosyn.agents.roles import client_for
from evosyn.agents.user import DEVICE_NOTE, asked_device_action, user_scenario_text
from evosyn.benchmarks.fake_llm_server import FakeLLMServer
from evosyn.benchmarks.llm_script import RoleScript
from evosyn.envs.gold import gold_messages
from evosyn.envs.packs import get_domain
from evosyn.envs.tau2.official_eval import tau2_reward
from evosyn.envs.verify import run_checks
from evosyn.config import RoleConfig
from evosyn.storage.store import Store
from evosyn.tasks.official import UserSim, evaluate_official, official_tasks
from tests.fakes.openai_server import ScriptedServer, completion

KEY = "sk-test-telecom"


def _device_calls(messages) -> list[str]:
    return [c.name for m in messages if m.role == "user" for c in m.tool_calls]


def _needs_device(task) -> bool:
    return any(a.requestor == "user" for a in task.gold_actions)


@pytest.fixture
def role(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def make(base_url: str) -> RoleConfig:
        return RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini", base_url=base_url, max_retries=2)
    return make


def test_a_telecom_round_with_an_llm_teacher_and_user_verifies_device_tasks_as_tau2_does(tmp_path, role):
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_pack
    from evosyn.tasks import stages
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass

    dom = get_domain("telecom")
    script = RoleScript(dom)
    store = Store(tmp_path / "s")
    space = load_initial_space(get_pack("telecom"), run_id="tel-llm")
    # the embedded generator's tasks (their phones start broken: a starting state the LLM Generator's reply
    # cannot set), generated first so the scripted model knows each task's conversation; the pass below reads
    # them back and rolls them out
    embedded = Ctx(store, "tel-llm", 1, 0, get_domain("telecom"))
    blueprints = stages.plan(embedded, space, stages.design(embedded, space, ColdStart(), 16, "evosyn"))
    for task in stages.generate(embedded, space, blueprints):
        script.remember(task)
    with FakeLLMServer(script) as server:
        llm = {r: role(server.base_url) for r in ("teacher", "user")}
        result = run_pass(Ctx(store, "tel-llm", 1, 0, get_domain("telecom"), llm_roles=llm), space, ColdStart(), 16)
    kept = [k for k in result.kept if _needs_device(dom.task_from_json(k.task.definition))]
    assert len(kept) >= 3, f"{len(result.kept)} kept, {len(kept)} with device actions"
    for k in kept:  # the LLM user performed them: user tool calls in the recorded trajectory, stepped as the user
        gold_user = [a.name for a in dom.task_from_json(k.task.definition).gold_actions if a.requestor == "user"]
        assert _device_calls(k.trajectory.messages) == gold_user
        assert any(m.role == "tool" and m.requestor == "user" for m in k.trajectory.messages)
    calls = store.read_records("llm_calls", run_id="tel-llm")
    assert any(c.role == "user" for c in calls) and any(c.role == "teacher" for c in calls)
    for k in kept:
        task = dom.task_from_json(k.task.definition)
        ours = run_checks(dom, task, k.trajectory.messages, termination=k.trajectory.termination)
        theirs, note = tau2_reward("telecom", task, k.trajectory.messages, k.trajectory.termination)
        assert ours.reward == theirs == 1.0, (task.id, note)


def test_an_llm_generator_writes_device_actions_that_verify(tmp_path, role):
    """The Generator's reply names the user's tools with requestor "user" (the scripted model answers as the
    embedded builder plans); the tasks' gold actions are device actions, rolled out and verified."""
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_pack
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass

    dom = get_domain("telecom")
    script = RoleScript(dom)
    space = load_initial_space(get_pack("telecom"), run_id="tel-gen")
    with FakeLLMServer(script) as server:
        ctx = Ctx(Store(tmp_path / "s"), "tel-gen", 1, 0, get_domain("telecom"), llm_roles={"generator": role(server.base_url)})
        result = run_pass(ctx, space, ColdStart(), 24)
        asked = [r["body"] for r in server.requests]
    assert asked and all("TOOLS THE USER CALLS ON THEIR OWN DEVICE" in b["messages"][0]["content"] for b in asked)
    variants = asked[0]["response_format"]["json_schema"]["schema"]["properties"]["gold_actions"]["items"]["anyOf"]
    device = {v["properties"]["name"]["enum"][0] for v in variants if "requestor" in v["properties"]}
    assert device == {t.name for t in dom.tools("user")}
    kept = [k for k in result.kept if _needs_device(dom.task_from_json(k.task.definition))]
    assert len(kept) >= 3 and all(k.task.generator == "llm" for k in result.kept), len(kept)
    for k in kept:  # the user performed them in the verified rollout, stepped as the user
        task = dom.task_from_json(k.task.definition)
        assert _device_calls(k.trajectory.messages) == [a.name for a in task.gold_actions if a.requestor == "user"]
        assert all(dom.tool(a.name, "user") is not None for a in task.gold_actions if a.requestor == "user")
        assert run_checks(dom, task, k.trajectory.messages, termination=k.trajectory.termination).reward == 1.0


@pytest.fixture(scope="module")
def official():
    """Two official telecom test tasks with device actions whose users can tell them apart (many telecom tasks
    share their instructions, not their phone), and the scripted models that play them: ``agent_reply`` the
    served agent (the gold turns of the task its user named in its opening), ``user_reply(refuse)`` the
    customer (does on its phone what the agent names, or with ``refuse`` declines to, confirms, ends the call)."""
    dom = get_domain("telecom")
    text = {t.id: user_scenario_text(t.scenario)
            for t in official_tasks(get_domain("telecom"), "test") if _needs_device(t)}
    tasks = []
    for t in official_tasks(get_domain("telecom"), "test"):
        if t.id in text and not any(text[t.id] in text[o.id] or text[o.id] in text[t.id] for o in tasks):
            tasks.append(t)
    tasks = tasks[:2]
    turns = {t.id: [m for m in gold_messages(dom, t) if m.role == "assistant"] for t in tasks}
    scenarios = {t.id: text[t.id] for t in tasks}
    device = [t.name for t in dom.tools("user")]

    def agent_reply(body):
        k = sum(1 for m in body["messages"] if m["role"] == "assistant")
        task_id = body["messages"][1]["content"].split("@@")[0]  # telecom's ids hold "|"
        m = turns[task_id][min(k, len(turns[task_id]) - 1)]
        if m.tool_calls:
            c = m.tool_calls[0]
            return completion(tool_call={"id": c.id, "name": c.name, "arguments": c.arguments})
        return completion(content=m.content)

    def user_reply(refuse: bool = False):
        def reply(body):
            msgs = body["messages"]
            assert [t["function"]["name"] for t in body.get("tools", [])] == device
            [task_id] = [t for t, text in scenarios.items() if text in msgs[0]["content"]]
            if len(msgs) == 2:
                return completion(content=f"{task_id}@@My phone does not work.")
            said = msgs[-1]["content"] or ""
            asked = asked_device_action(said, device)
            if asked is not None and not refuse:
                return completion(tool_call={"id": f"dev{len(msgs)}", "name": asked[0], "arguments": asked[1]})
            if asked is not None:
                return completion(content="I would rather not touch my phone settings.")
            if "confirm" in said.lower():
                return completion(content="Yes, please go ahead.")
            return completion(content="Thanks, that is all. ###STOP###")
        return reply

    return tasks, scenarios, agent_reply, user_reply


def _evaluate(store, role, agent_reply, user_reply, ids):
    from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent

    with ScriptedServer(agent_reply) as agent_srv, ScriptedServer(user_reply) as user_srv:
        client = client_for("user", role(user_srv.base_url), store.root / "llm_cache").bound()
        agent = OpenAICompatibleAgent(agent_srv.base_url, "served-ckpt")
        res = evaluate_official(store, agent, UserSim("openai:gpt-4o-mini", client), run_id="tel-off", round=1,
                                env=get_domain("telecom"), split="test", model_version="served-ckpt", trials=1, task_ids=ids)
        agent.close()
        return res, user_srv.requests


@pytest.mark.parametrize("refuse", [False, True])
def test_the_official_telecom_split_with_an_llm_user_and_tau2s_evaluator_agree(tmp_path, role, official, refuse):
    """The user performs the device actions (every task solved), or declines them (none is): tau2's evaluator
    gives each trajectory the reward our verifier gives."""
    tasks, scenarios, agent_reply, user_reply = official
    store = Store(tmp_path / "s")
    res, requests = _evaluate(store, role, agent_reply, user_reply(refuse), [t.id for t in tasks])
    ours = {o.task_id: o.rewards[0] for o in res.tasks}
    assert set(ours.values()) == ({0.0} if refuse else {1.0}), [o.failed_checks for o in res.tasks]
    by_id = {t.id: t for t in tasks}
    for traj in store.read_records("trajectories", run_id="tel-off"):
        task = by_id[traj.task_id]
        wanted = [a.name for a in task.gold_actions if a.requestor == "user"]
        assert _device_calls(traj.messages) == ([] if refuse else wanted)
        theirs, note = tau2_reward("telecom", task, traj.messages, traj.termination)
        assert theirs == ours[traj.task_id], note
    system = requests[0]["body"]["messages"][0]["content"]  # the text-only prompt, then its phone
    assert any(system == render("user.md", scenario=text) + "\n\n" + DEVICE_NOTE for text in scenarios.values())


def test_evaluate_official_on_telecom_with_an_llm_user_from_the_command_line(tmp_path, official, monkeypatch):
    from click.testing import CliRunner

    from evosyn.flows.cli import main

    tasks, _, agent_reply, user_reply = official
    monkeypatch.setenv("EVOSYN_TEST_USER_KEY", KEY)
    with ScriptedServer(agent_reply) as agent_srv, ScriptedServer(user_reply()) as user_srv:
        result = CliRunner().invoke(main, [
            "--home", str(tmp_path / "h"), "evaluate", "--official", "--domain", "telecom", "--split", "test",
            "--agent", "openai_compatible:served", "--agent-base-url", agent_srv.base_url,
            "--user", "openai_compatible:user-sim", "--user-base-url", user_srv.base_url,
            "--user-key-env", "EVOSYN_TEST_USER_KEY", "--task-ids", ",".join(t.id for t in tasks), "--quiet"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "pass^k k=1: 1.000" in result.stdout, result.stdout
    store = Store(tmp_path / "h", create=False)
    rows = [e for e in store.read_records("evaluations") if e.task_set == "official:test"]
    assert sorted(e.task_id for e in rows) == sorted(t.id for t in tasks) and all(e.success for e in rows)
    assert any(c.role == "user" for c in store.read_records("llm_calls"))
