"""Task agents: the OpenAI-compatible agent over real HTTP, the embedded learner, exports."""
import json

import pytest

from evosyn.agents.learners.exports import ExportError, openai_messages, sharegpt
from evosyn.agents.learners.harness import TaskCase, evaluate, run_episode, success_by_slice
from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent
from evosyn.agents.verifier import verify
from evosyn.envs.packs import get_domain
from evosyn.storage.records import SFTExample
from evosyn.tasks.learn import fit_embedded
from tests.fakes.openai_server import ScriptedServer, completion


@pytest.fixture(scope="module")
def kept(space, synth_pass):
    return synth_pass(space, 96, seed=11).kept


def replaying(teacher_messages):
    """A scripted model: its k-th answer is the teacher's k-th assistant turn."""
    turns = [m for m in teacher_messages if m.role == "assistant"]

    def respond(body):
        k = sum(1 for m in body["messages"] if m["role"] == "assistant")
        m = turns[min(k, len(turns) - 1)]
        if m.tool_calls:
            c = m.tool_calls[0]
            return completion(tool_call={"id": c.id, "name": c.name, "arguments": c.arguments})
        return completion(content=m.content)
    return respond


def test_openai_compatible_agent_over_http(kept):
    cand = next(c for c in kept if c.task.scenario["intents"][0]["tool"] and not c.task.scenario["challenges"])
    dom = get_domain("airline")
    with ScriptedServer(replaying(cand.trajectory.messages)) as server:
        agent = OpenAICompatibleAgent(base_url=server.base_url, model="scripted")
        traj = run_episode(agent, cand.task, dom, model_version="scripted")
        first = server.requests[0]["body"]
    assert traj.termination == "user_stop"
    assert verify(cand.task.model_copy(update={"requested": {}}), traj, dom).passed
    assert first["model"] == "scripted" and first["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in first["tools"]} >= {"cancel_reservation", "get_user_details"}


def test_malformed_tool_arguments_from_the_model_are_scored_not_raised(kept):
    cand = kept[0]
    bad = completion(tool_call={"name": "get_user_details", "arguments": {}})
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "{not json"
    dom = get_domain("airline")
    with ScriptedServer(lambda body: bad) as server:
        agent = OpenAICompatibleAgent(base_url=server.base_url, model="scripted")
        traj = run_episode(agent, cand.task, dom, max_steps=3)
    v = verify(cand.task.model_copy(update={"requested": {}}), traj, dom)
    assert traj.termination == "max_steps" and not v.passed
    assert any(c.name == "executable" for c in v.failed())


def test_untrained_learner_scores_zero_and_training_helps(kept):
    dom = get_domain("airline")
    cases = [TaskCase(c.task, c.verdict.observed) for c in kept[:24]]
    untrained = fit_embedded([], get_domain("airline"))
    ev0, _ = evaluate(untrained, cases, dom, run_id="t", round=1, task_set="test", model_version="none")
    assert sum(e.success for e in ev0) == 0
    learner = fit_embedded([c.trajectory for c in kept[24:]], get_domain("airline"))
    ev1, trajs = evaluate(learner, cases, dom, run_id="t", round=1, task_set="test", model_version="v1")
    assert sum(e.success for e in ev1) > 0
    assert all(e.trajectory_id == t.trajectory_id and e.observed for e, t in zip(ev1, trajs))
    table = success_by_slice(ev1, "task_family")
    assert sum(n for _, n in table.values()) == len(cases)


def test_learner_sees_no_gold(kept, tmp_path):
    learner = fit_embedded([c.trajectory for c in kept], get_domain("airline"))
    path = learner.save(tmp_path / "m.joblib")
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["fingerprint"] == learner.fingerprint and meta["n_trajectories"] == len(kept)
    blob = path.read_bytes()
    gold_ids = {a["action_id"].encode() for c in kept for a in c.task.tau2_task["evaluation_criteria"]["actions"]}
    assert not any(g in blob for g in list(gold_ids)[:50])


def test_fit_cpu_by_phase_is_measured_and_never_saved(kept, tmp_path):
    from evosyn.agents.learners.embedded import EmbeddedLearner

    a = fit_embedded([c.trajectory for c in kept[:40]], get_domain("airline"))
    assert list(a.fit_cpu) == ["conventions", "features", "hashing", "sgd"]
    assert a.fit_cpu["features"] > 0 and a.fit_cpu["sgd"] > 0
    # the sgd phase model by model: every fitted model once, with the size of its matrix, adding up to the phase
    models = a.fit_cpu.models
    assert {"action", "argument"} <= set(models) <= {"action", "write", "asked", "argument", "report"}
    assert all(getattr(a, name) is not None for name in models)
    assert models["argument"]["classes"] == 2 and models["action"]["classes"] == len(a.action.classes_)
    assert all(m["rows"] > 0 and m["nonzeros"] >= m["rows"] for m in models.values())
    assert sum(m["cpu_seconds"] for m in models.values()) == pytest.approx(a.fit_cpu["sgd"], abs=1e-6)
    b = fit_embedded([c.trajectory for c in kept[:40]], get_domain("airline"))
    # the saved model is the same bytes for the same fit: the measurement is not part of it
    assert a.save(tmp_path / "a.joblib").read_bytes() == b.save(tmp_path / "b.joblib").read_bytes()
    loaded = EmbeddedLearner.load(tmp_path / "a.joblib")
    assert loaded.fit_cpu == dict.fromkeys(a.fit_cpu, 0.0) and loaded.fingerprint == a.fingerprint
    assert loaded.fit_cpu.models == {}


def test_a_fit_hashed_chunk_by_chunk_is_the_fit_of_all_rows_at_once(kept, tmp_path, monkeypatch):
    """The candidate rows are hashed a chunk of trajectories at a time (the fit's memory holds the hashed matrix,
    not every row as Python objects): the same matrix, so the same saved model, whatever the chunk."""
    import evosyn.agents.learners.embedded as embedded

    trajectories = [c.trajectory for c in kept[:40]]
    whole = fit_embedded(trajectories, get_domain("airline"))  # CHUNK (100) > 40 trajectories: one block
    monkeypatch.setattr(embedded, "CHUNK", 3)
    chunked = fit_embedded(trajectories, get_domain("airline"))
    assert chunked.fit_cpu.models["argument"]["rows"] == whole.fit_cpu.models["argument"]["rows"]
    assert whole.save(tmp_path / "a.joblib").read_bytes() == chunked.save(tmp_path / "b.joblib").read_bytes()


def test_sharegpt_export_alternates_and_openai_keeps_tool_calls(kept):
    tools = [t.openai_schema() for t in get_domain("airline").tools("assistant")]
    for c in kept:
        ex = SFTExample(run_id="t", round=0, example_id="e", task_id=c.task.task_id,
                        trajectory_id=c.trajectory.trajectory_id, messages=c.trajectory.messages, tools=tools)
        conv = sharegpt(ex)["conversations"]
        sides = ["u" if t["from"] in ("human", "observation") else "a" for t in conv]
        assert sides[0] == "u" and sides[-1] == "a" and all(x != y for x, y in zip(sides, sides[1:]))
        oa = openai_messages(ex)
        calls = [m for m in oa["messages"] if m.get("tool_calls")]
        assert all(json.loads(m["tool_calls"][0]["function"]["arguments"]) is not None for m in calls)
    assert json.loads(sharegpt(ex)["tools"])[0]["type"] == "function"
    broken = ex.model_copy(update={"messages": [m for m in ex.messages if m.role != "tool"]})
    with pytest.raises(ExportError, match="function_call followed by"):
        sharegpt(broken)


@pytest.mark.slow
def test_skill_on_multi_write_tasks_comes_from_multi_write_training_data(space, synth_pass):
    """Same-size training sets, with and without tasks of two or more writes; scored on 3+ write tasks."""
    import random

    from evosyn.agents.designer import NewFactor
    from evosyn.tasks.datasets import with_count_factors

    space = with_count_factors(space, ("num_write",))
    pool = synth_pass(space, 1000, seed=5, steering=NewFactor(factor="num_write"))
    kept = [(c.trajectory, c.task, c.verdict.observed["num_write"][0]) for c in pool.kept]
    random.Random(0).shuffle(kept)
    heavy = [(task, obs) for _, task, obs in kept[:100] if obs in ("3-4", "5+")]
    train = kept[100:]
    single = [t for t, _, nw in train if nw in ("0", "1")][:340]
    mixed = [t for t, _, _ in train][:340]
    assert len(heavy) >= 15 and len(single) == len(mixed) == 340
    cases = [TaskCase(task, {"num_write": [obs]}) for task, obs in heavy]
    dom = get_domain("airline")
    wins = {}
    for name, data in (("single", single), ("mixed", mixed)):
        evals, _ = evaluate(fit_embedded(data, dom), cases, dom, run_id="t", round=1, task_set="test", model_version=name)
        wins[name] = sum(e.success for e in evals)
    # trained on one write at most, it closes after the first write; with multi-write data it carries on
    assert wins["single"] == 0 and wins["mixed"] >= 4, wins
