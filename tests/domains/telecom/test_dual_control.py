"""Dual control end to end: the user performs the device actions asked for, the verifier checks both states."""
from __future__ import annotations

import pytest

from evosyn.agents.teacher import EmbeddedTeacher
from evosyn.agents.user import ReactiveUser, asked_device_action
from evosyn.envs.perturb import perturb, rematerialize
from evosyn.envs.tau2.task import Tau2Task
from evosyn.envs.verify import run_checks
from evosyn.storage.records import Message, ToolCall
from tests.domains.telecom.conftest import selection, synth_task


@pytest.fixture(scope="module")
def solved(telecom, generator):
    sel = selection("service_troubleshooting", "fulfill", "3-4")
    plan = generator.plan(sel, "bp-dual", 1)
    task = synth_task(plan, sel)
    traj = EmbeddedTeacher(telecom).rollout(task)
    return Tau2Task.from_json(task.definition), traj.messages, plan


def test_teacher_asks_and_the_user_performs_each_device_action(solved):
    _, msgs, plan = solved
    device = [(i, m) for i, m in enumerate(msgs) if m.role == "user" and m.tool_calls]
    assert len(device) == sum(1 for a in plan.actions if len(a) > 2 and a[2] == "user")
    for i, m in device:
        call = m.tool_calls[0]
        assert call.requestor == "user" and call.name in (msgs[i - 1].content or "")  # the agent named the tool
        assert msgs[i + 1].role == "tool" and msgs[i + 1].tool_call_id == call.id and msgs[i + 1].requestor == "user"


def test_verifier_and_tau2_accept_the_solution(telecom, solved):
    from evosyn.envs.tau2.official_eval import tau2_reward

    task, msgs, _ = solved
    outcome = run_checks(telecom, task, msgs, termination="user_stop")
    assert outcome.passed, [c for c in outcome.checks if not c.passed]
    assert tau2_reward("telecom", task, msgs, "user_stop")[0] == 1.0


def test_missing_device_action_fails_both_verifier_and_tau2(telecom, solved):
    from evosyn.envs.tau2.official_eval import tau2_reward

    task, msgs, _ = solved
    dropped = perturb(telecom, task, msgs, "device_write_dropped")
    assert dropped is not None and len(dropped) == len(msgs) - 2
    outcome = run_checks(telecom, task, dropped, termination="user_stop")
    assert not outcome.passed and outcome.reward == 0.0
    assert {c.name for c in outcome.checks if not c.passed} >= {"state"}
    assert tau2_reward("telecom", task, dropped, "user_stop")[0] == 0.0


def test_extra_device_action_fails_the_state_check(telecom, solved):
    task, msgs, _ = solved
    call = ToolCall(id="extra", name="toggle_wifi", arguments={}, requestor="user")
    extra = msgs[:-1] + [Message(role="user", tool_calls=[call], requestor="user"),
                         Message(role="tool", content="", tool_call_id="extra", requestor="user"), msgs[-1]]
    outcome = run_checks(telecom, task, rematerialize(telecom, task, extra), termination="user_stop")
    assert not outcome.passed
    assert "state" in {c.name for c in outcome.checks if not c.passed}


def test_reactive_user_performs_only_device_actions_named_by_the_agent(telecom):
    tools = [s.name for s in telecom.tools("user")]
    user = ReactiveUser({"user_id": "555-123-2002", "intents": [{"say": "fix my phone"}]}, device_tools=tools)
    reply = user.respond("Please do this on your device: run set_network_mode_preference with "
                         '{"mode": "4g_5g_preferred"}.')
    assert reply.tool_calls[0].name == "set_network_mode_preference"
    assert reply.tool_calls[0].arguments == {"mode": "4g_5g_preferred"} and reply.tool_calls[0].requestor == "user"
    assert not user.respond("Could you try turning your phone off and on again?").tool_calls
    assert asked_device_action("please run toggle_data now", ["toggle_data", "toggle_data_saver_mode"]) == (
        "toggle_data", {})
    assert not ReactiveUser({"user_id": "x", "intents": []}).respond("run toggle_data").tool_calls  # no device


@pytest.mark.parametrize("outcome,writes", [("fulfill", "2"), ("fulfill", "5+"), ("refuse", "0")])
def test_teacher_solutions_pass_every_check_with_the_telecom_policy(telecom, generator, monkeypatch, outcome, writes):
    from evosyn.domains.telecom.policy import check_write
    from tests.domains.telecom.conftest import FAMILIES

    from evosyn.envs.packs import get_pack

    assert get_pack("telecom").policy_rules() is check_write  # the verifier's rules, through the registry
    teacher = EmbeddedTeacher(telecom)
    for n, family in enumerate(FAMILIES):
        sel = selection(family, outcome, writes, challenges=[["multi_intent_interleaving"], ["preference_change"],
                                                             ["missing_information"]][n % 3])
        plan = generator.plan(sel, "bp-policy", n)
        task = synth_task(plan, sel)
        traj = teacher.rollout(task)
        outcome_ = run_checks(telecom, Tau2Task.from_json(task.definition), traj.messages, termination=traj.termination,
                              requested={"num_write": [writes]})
        assert outcome_.passed, (family, [c for c in outcome_.checks if not c.passed])


class ScriptedAgent:
    """Follows a task's gold like a policy-abiding agent would: asks for device actions in words, confirms writes."""

    name = "scripted"

    def __init__(self, task, telecom):
        self.todo = list(task.gold_actions)
        self.info = task.communicate_info
        self.telecom = telecom
        self.confirmed = False  # the current action was asked for (device) or confirmed (write)

    def reset(self, tools, policy):
        self.tools = {t["function"]["name"] for t in tools}

    def act(self, messages):
        from evosyn.envs.gold import confirmation_request, device_request

        if not self.todo:
            return Message(role="assistant", content="All done. For your records: " + "; ".join(self.info) + ".")
        action = self.todo[0]
        if action.requestor == "user":
            if self.confirmed:  # asked already: the user's device answered
                self.todo.pop(0)
                self.confirmed = False
                return self.act(messages)
            self.confirmed = True
            return Message(role="assistant", content=device_request(action.name, action.arguments))
        if self.telecom.tool_kind(action.name) == "write" and not self.confirmed:
            self.confirmed = True
            return Message(role="assistant", content=confirmation_request(action.name, action.arguments))
        self.todo.pop(0)
        self.confirmed = False
        return Message(role="assistant", tool_calls=[ToolCall(id=f"a{len(messages)}", name=action.name,
                                                              arguments=dict(action.arguments))])


def test_learner_harness_user_performs_the_device_actions_it_is_asked_for(telecom, generator):
    from evosyn.agents.learners.harness import run_episode

    sel = selection("service_troubleshooting", "fulfill", "3-4")
    task = synth_task(generator.plan(sel, "bp-harness", 2), sel)
    tau2_task = Tau2Task.from_json(task.definition)
    traj = run_episode(ScriptedAgent(tau2_task, telecom), task, telecom)
    device = [m for m in traj.messages if m.role == "user" and m.tool_calls]
    assert device and all(m.tool_calls[0].requestor == "user" for m in device)
    assert traj.termination == "user_stop"
    assert run_checks(telecom, tau2_task, traj.messages, termination=traj.termination).passed


def test_agent_view_shows_device_actions_as_user_text(solved):
    from evosyn.agents.teacher import to_chat

    _, msgs, _ = solved
    chat = to_chat(msgs)
    assert all(c["role"] != "tool" or "tool_call_id" in c for c in chat)
    assert any(c["role"] == "user" and c["content"].startswith("(on my device:") for c in chat)
    assert any(c["role"] == "user" and c["content"].startswith("My device shows:") for c in chat)
    # every OpenAI tool message answers an assistant tool call
    calls = {tc["id"] for c in chat if c.get("tool_calls") for tc in c["tool_calls"]}
    assert {c["tool_call_id"] for c in chat if c["role"] == "tool"} <= calls


def test_interleaved_requests_come_after_the_previous_request_is_fully_served(telecom, generator):
    sel = selection("billing_issue", "fulfill", "5+", challenges=["multi_intent_interleaving"])
    plan = next(p for s in range(10) if len((p := generator.plan(sel, "bp-inter", s)).intents) > 1
                and any("ends_with" in i for i in p.intents))
    msgs = EmbeddedTeacher(telecom).rollout(synth_task(plan, sel)).messages
    calls = [c for m in msgs for c in m.tool_calls]
    for n, intent in enumerate(plan.intents[1:], start=1):
        said = next(i for i, m in enumerate(msgs) if m.role == "user" and m.content and intent["say"] in m.content)
        last = plan.intents[n - 1].get("ends_with") or plan.intents[n - 1]
        done = [i for i, m in enumerate(msgs) for c in m.tool_calls if c.name == last["tool"]
                and (not last["arguments"] or c.arguments == last["arguments"])]
        assert done and done[0] < said  # the previous request's last write came first
    assert len(calls) == len(plan.actions)
