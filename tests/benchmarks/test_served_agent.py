"""The planted-weakness agent over real HTTP: the plain replay solves every task, the weak one fails exactly the tasks
with two or more writes and solves the rest, and a conversation it cannot place is counted."""
from __future__ import annotations

from collections import Counter

import pytest
from evosyn.agents.learners.harness import evaluate
from evosyn.agents.learners.openai_agent import OpenAICompatibleAgent
from evosyn.benchmarks.served_agent import WEAK_BUCKETS, serve
from evosyn.envs.packs import get_domain
from evosyn.storage.records import Message
from evosyn.storage.store import Store


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    """A store holding one verified synthesis pass of airline, and its task cases."""
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.tasks.datasets import cases_for
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass

    env = get_domain("airline")
    store = Store(tmp_path_factory.mktemp("served-agent"))
    space = load_initial_space(env.pack, run_id="t")
    run_pass(Ctx(store, space.run_id, 0, 3, env), space, ColdStart(), 80)
    ids = {t.task_id for t in store.read_records("tasks", run_id=space.run_id)}
    return env, store, cases_for(store, space.run_id, ids)


def outcomes(store, env, cases, max_writes):
    """(num_write bucket, success) -> tasks, and the agent's stats, evaluated through the server."""
    server, agent = serve(store, env, max_writes)
    client = OpenAICompatibleAgent(server.base_url, "planted")
    try:
        found, _ = evaluate(client, cases, env, run_id="t", round=1, task_set="test", model_version="m")
    finally:
        client.close()
        server.stop()
    assert server.stats()["requests"] > len(cases)  # every episode went over HTTP
    return Counter((e.observed["num_write"][0], e.success) for e in found), agent.stats()


def test_the_weak_agent_fails_exactly_the_tasks_with_two_or_more_writes(synthesized):
    env, store, cases = synthesized
    plain, plain_stats = outcomes(store, env, cases, None)
    weak, weak_stats = outcomes(store, env, cases, 1)
    assert plain_stats["misses"] == weak_stats["misses"] == 0
    buckets = {b for b, _ in plain}
    assert {"1"} < buckets and buckets & set(WEAK_BUCKETS)  # both sides are in the sample
    assert all(ok for _, ok in plain)  # the replay alone solves every task
    for (bucket, ok), n in weak.items():
        assert ok == (bucket not in WEAK_BUCKETS), (bucket, ok, n)  # fails 2+ writes, solves the others
    multi = sum(n for (b, _), n in weak.items() if b in WEAK_BUCKETS)
    assert weak_stats["closed_before_a_write"] == multi


def test_a_conversation_it_cannot_place_is_answered_goodbye_and_counted(synthesized):
    env, store, _ = synthesized
    server, agent = serve(store, env)
    client = OpenAICompatibleAgent(server.base_url, "planted")
    try:
        reply = client.act([Message(role="user", content="I would like to buy a boat.")])
    finally:
        client.close()
        server.stop()
    assert reply.content == "Goodbye." and agent.stats()["misses"] == 1
