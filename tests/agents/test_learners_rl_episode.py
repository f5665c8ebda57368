"""`RLEpisode`: a synthesized task as a turn-at-a-time episode a trainer drives; the verifier's reward at the end,
never an exception for what the policy sends."""
import json

import pytest
from evosyn.agents.learners.rl_episode import (
    CHECKS,
    RLEpisode,
    assistant_message,
    score,
)
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_domain
from evosyn.storage.records import Message, ToolCall


@pytest.fixture(scope="module")
def kept(synth_pass, space):
    return synth_pass(space, 12).kept


@pytest.fixture(scope="module")
def telecom_kept(synth_pass):
    return synth_pass(load_initial_space(get_domain("telecom").pack, run_id="t"), 12).kept


def openai_form(m: Message) -> dict:
    """A stored assistant turn as an OpenAI chat message (arguments as JSON text), as a trainer's model sends it."""
    return {"role": "assistant", "content": m.content,
            "tool_calls": [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                           for c in m.tool_calls] or None}


def test_the_opening_is_deterministic(kept, airline):
    task = kept[0].task
    one, two = RLEpisode(task, airline), RLEpisode(task, airline)
    first = one.opening()
    assert first == two.opening() and first == RLEpisode(task, airline).opening()
    assert first[0] == {"role": "system", "content": airline.task_policy(airline.task_from_json(task.definition))}
    assert first[1]["role"] == "user" and first[1]["content"] == kept[0].trajectory.messages[0].content
    assert not one.done and one.messages[0].role == "user"


def test_another_domains_task_is_refused(kept):
    with pytest.raises(ValueError, match="of domain 'airline', not 'telecom'"):
        RLEpisode(kept[0].task, get_domain("telecom"))


def test_replaying_the_teachers_turns_earns_reward_one(kept, airline):
    assert len(kept) >= 8
    for k in kept:
        ep = RLEpisode(k.task, airline)
        ep.opening()
        stored = k.trajectory.messages
        for i, m in enumerate(stored):
            if m.role != "assistant":
                continue
            assert not ep.done, k.task.task_id
            seen = ep.step(openai_form(m))
            if m.tool_calls:  # the task's environment executes the calls: the stored results come back
                results = stored[i + 1:i + 1 + len(m.tool_calls)]
                assert seen == [{"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content or ""}
                                for r in results]
            else:
                assert [s["role"] for s in seen] in ([], ["user"])
        assert ep.termination == "user_stop", k.task.task_id
        s = ep.score()
        assert (s.reward, s.benchmark_reward, s.reason) == (1.0, 1.0, ""), (k.task.task_id, s.reason)
        assert s.checks == {c: 1.0 for c in CHECKS}
        assert s.metrics() == {"benchmark_reward": 1.0, **{f"check_{c}": 1.0 for c in CHECKS}}
        with pytest.raises(RuntimeError, match="ended"):
            ep.step({"role": "assistant", "content": "one more"})


def test_replaying_in_a_dual_control_domain_runs_the_users_device(telecom_kept):
    telecom = get_domain("telecom")
    devices = 0
    for k in telecom_kept:
        ep = RLEpisode(k.task, telecom)
        ep.opening()
        for m in k.trajectory.messages:
            if m.role == "assistant" and not ep.done:
                ep.step(m)  # a record is accepted as it is
        devices += sum(c.requestor == "user" for m in ep.messages for c in m.tool_calls)
        assert ep.score().reward == 1.0, (k.task.task_id, ep.score().reason)
    assert devices > 0  # the user's device calls are in the episode's record, and the verifier counts them


@pytest.mark.parametrize("call, why", [
    ({"name": "get_user_details", "arguments": "{not json"}, "executable: get_user_details: unknown arguments"),
    ({"name": "get_user_details", "arguments": "[1, 2]"}, "executable: get_user_details: unknown arguments"),
    ({"name": "no_such_tool", "arguments": "{}"}, "executable: no assistant tool named 'no_such_tool'"),
])
def test_a_malformed_call_stays_a_call_and_scores_zero_with_its_reason(kept, airline, call, why):
    ep = RLEpisode(kept[0].task, airline)
    ep.opening()
    seen = ep.step({"role": "assistant", "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": call}]})
    assert len(seen) == 1 and seen[0]["tool_call_id"] == "c1" and seen[0]["content"].startswith("Error")
    made = ep.messages[-2].tool_calls
    assert [c.name for c in made] == [call["name"]] and ep.messages[-1].error
    s = ep.score()  # mid-episode: judged as a conversation cut off (tau2's max_steps)
    assert s.reward == 0.0 and s.checks["executable"] == 0.0 and why in s.reason
    ep.step({"role": "assistant", "content": "Goodbye."})
    assert ep.done and ep.score().reward == 0.0


def test_a_raising_tool_is_an_error_result(kept, airline, monkeypatch):
    ep = RLEpisode(kept[0].task, airline)
    ep.opening()

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ep.episode, "step", boom)
    seen = ep.step({"role": "assistant", "tool_calls": [{"id": "c9", "name": "get_user_details",
                                                         "arguments": {"user_id": "x"}}]})
    assert seen == [{"role": "tool", "tool_call_id": "c9", "content": "Error: RuntimeError: disk on fire"}]
    assert ep.messages[-1].error and not ep.done


def test_max_steps_ends_the_episode(kept, airline):
    ep = RLEpisode(kept[0].task, airline, max_steps=2)
    ep.opening()
    look = {"role": "assistant", "tool_calls": [{"id": "c1", "name": "get_user_details",
                                                 "arguments": {"user_id": "nobody"}}]}
    ep.step(look)
    assert not ep.done
    ep.step(look)
    assert ep.termination == "max_steps" and ep.trajectory().termination == "max_steps"
    assert ep.score().reward == 0.0


def test_an_unverifiable_trajectory_scores_zero_never_raises(kept, airline):
    k = kept[0]
    s = score(k.task, k.trajectory, airline)
    assert s.reward == 1.0
    other = k.task.model_copy(update={"domain": "telecom"})  # the verifier refuses another domain's task
    s = score(other, k.trajectory, airline)
    assert s.reward == 0.0 and s.checks == {c: 0.0 for c in CHECKS} and s.reason.startswith("unverifiable: ")


def test_assistant_message_reads_every_form_of_a_turn():
    want = Message(role="assistant", content="Let me look.",
                   tool_calls=[ToolCall(id="c1", name="get_user_details", arguments={"user_id": "mia_li_3668"})])
    nested = {"role": "assistant", "content": "Let me look.",
              "tool_calls": [{"id": "c1", "type": "function",
                              "function": {"name": "get_user_details", "arguments": '{"user_id": "mia_li_3668"}'}}]}
    flat = {"role": "assistant", "content": "Let me look.",
            "tool_calls": [{"id": "c1", "name": "get_user_details", "arguments": '{"user_id": "mia_li_3668"}'}]}
    as_dict = {**flat, "tool_calls": [{**flat["tool_calls"][0], "arguments": {"user_id": "mia_li_3668"}}]}
    parts = {**nested, "content": [{"type": "text", "text": "Let me "}, {"type": "text", "text": "look."}]}
    for form in (nested, flat, as_dict, parts):
        assert assistant_message(form) == want, form
    from openai.types.chat import ChatCompletionMessage

    assert assistant_message(ChatCompletionMessage.model_validate(nested)) == want
    vf = pytest.importorskip("verifiers")
    assert assistant_message(vf.AssistantMessage(content="Let me look.", tool_calls=[
        vf.ToolCall(id="c1", name="get_user_details", arguments='{"user_id": "mia_li_3668"}')])) == want
    # no id: numbered; unreadable arguments kept as they came; no content: None
    got = assistant_message({"content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}},
                                                           {"function": {"name": "g", "arguments": None}}]})
    assert got.content is None and [(c.id, c.name, c.arguments) for c in got.tool_calls] == [
        ("call_0", "f", {"_unparsed": "{x"}), ("call_1", "g", {})]
    assert assistant_message({"role": "assistant", "content": "Bye."}) == Message(role="assistant", content="Bye.")
