"""Our direct tool calls give tau2's ``get_response`` observations byte for byte, on every official gold
trajectory of every tau2 domain, and our state digests partition the final states as tau2's DB hashes do
(the full runs are slow: tau2's reference environment is rebuilt for every task)."""
from __future__ import annotations

import pytest
from tau2.data_model.message import ToolCall

from evosyn.envs.packs import get_domain



def _reference(dom, base_dump):
    """tau2's own environment over a private copy of the pristine DB (tau2 loads it from its files when
    the domain has a device DB, which is small)."""
    if base_dump is None:
        return dom._mod.get_environment()
    return dom._mod.get_environment(db=type(dom.cow.base).model_validate(base_dump))


def _tau2_hash(env) -> tuple[str | None, str | None]:
    return env.get_db_hash(), env.get_user_db_hash()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["airline", "retail", "telecom"])
def test_observations_and_digests_equal_tau2_on_every_gold_trajectory(name):
    dom = get_domain(name)
    base_hash = (dom.cow.base.get_hash(), dom.user_cow.base.get_hash() if dom.user_cow else None)
    base_dump = None if dom.user_cow is not None else dom.cow.base.model_dump()
    tasks = [t for t in dom.tasks(None) if t.gold_actions]
    ours_final, theirs_final, calls = [], [], 0
    for task in tasks:
        ours, env = dom.episode(task.initial_state), _reference(dom, base_dump)
        if task.initial_state is not None:  # tau2's own objects: what tau2's environment reads
            env.set_state(initialization_data=task.initial_state.initialization_data,
                          initialization_actions=task.initial_state.initialization_actions,
                          message_history=task.initial_state.message_history or [])
        for n, action in enumerate(task.gold_actions):
            obs = ours.step(action.name, action.arguments, action.requestor)
            msg = env.get_response(ToolCall(id=f"c{n}", name=action.name, arguments=dict(action.arguments),
                                            requestor=action.requestor))
            assert (obs.content, obs.error) == (msg.content, msg.error), (task.id, n, action.name)
            calls += 1
        ours_final.append(ours.state_digest())
        theirs_final.append(_tau2_hash(env))
    assert calls > len(tasks)
    # equal digests exactly where tau2's hashes are equal (tasks that end in the same state)
    groups_ours = {d: {i for i, x in enumerate(ours_final) if x == d} for d in ours_final}
    groups_theirs = {h: {i for i, x in enumerate(theirs_final) if x == h} for h in theirs_final}
    assert sorted(map(sorted, groups_ours.values())) == sorted(map(sorted, groups_theirs.values()))
    # nothing any episode did reached the shared base DBs
    assert (dom.cow.base.get_hash(), dom.user_cow.base.get_hash() if dom.user_cow else None) == base_hash


@pytest.mark.slow
@pytest.mark.parametrize("name", ["airline", "retail", "telecom"])
def test_a_state_change_is_seen_by_digest_exactly_when_tau2_hash_sees_it(name):
    """Before and after every gold write: the digest changes iff tau2's full hash changes."""
    dom = get_domain(name)
    base_dump = None if dom.user_cow is not None else dom.cow.base.model_dump()
    tasks = [t for t in dom.tasks("base") if t.gold_actions][:25]
    seen = 0
    for task in tasks:
        ours, env = dom.episode(task.initial_state), _reference(dom, base_dump)
        if task.initial_state is not None:
            env.set_state(initialization_data=task.initial_state.initialization_data,
                          initialization_actions=task.initial_state.initialization_actions,
                          message_history=[])
        for n, action in enumerate(task.gold_actions):
            if dom.tool_kind(action.name, action.requestor) != "write":
                ours.step(action.name, action.arguments, action.requestor)
                env.get_response(ToolCall(id=f"c{n}", name=action.name, arguments=dict(action.arguments),
                                          requestor=action.requestor))
                continue
            before, before_tau2 = ours.state_digest(), _tau2_hash(env)
            ours.step(action.name, action.arguments, action.requestor)
            env.get_response(ToolCall(id=f"c{n}", name=action.name, arguments=dict(action.arguments),
                                      requestor=action.requestor))
            assert (ours.state_digest() != before) == (_tau2_hash(env) != before_tau2), (task.id, n, action.name)
            seen += 1
    assert seen


ODD_CALLS = [
    ("no_such_tool", {}, "assistant"),
    ("get_user_details", {}, "assistant"),  # a missing argument
    ("get_user_details", {"user_id": "nobody"}, "assistant"),  # the tool raises
    ("get_user_details", {"user_id": "mia_li_3668", "extra": 1}, "assistant"),  # an unknown argument
    ("get_user_details", {"tool_name": "x", "user_id": "mia_li_3668"}, "assistant"),  # collides with tau2's own
    ("get_user_details", {"requestor": "user", "user_id": "mia_li_3668"}, "assistant"),
    ("get_user_details", {"user_id": "mia_li_3668"}, "user"),  # airline has no user tools
    ("calculate", {"expression": "2 + 2"}, "assistant"),
    ("calculate", {"expression": "import os"}, "assistant"),
]


@pytest.mark.parametrize("name,arguments,requestor", ODD_CALLS)
def test_failing_and_odd_calls_read_as_tau2_reads_them(airline, name, arguments, requestor):
    from tau2.domains.airline.environment import get_environment

    obs = airline.episode().step(name, arguments, requestor)
    env = get_environment(db=airline.cow.fresh()[0])  # tau2's get_response over a private DB
    msg = env.get_response(ToolCall(id="c", name=name, arguments=dict(arguments), requestor=requestor))
    assert (obs.content, obs.error) == (msg.content, msg.error)


def test_read_tools_copy_nothing_and_writes_copy_only_what_they_touch(airline):
    ep = airline.episode()
    db = ep.env.tools.db
    for name, args in [("get_user_details", {"user_id": "mia_li_3668"}),
                       ("get_reservation_details", {"reservation_id": "EHGLP3"}),
                       ("search_direct_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-16"})]:
        assert not ep.step(name, args).error
    assert (db.users._owned, db.reservations._owned, db.flights._owned) == (set(), set(), set())
    assert not ep.step("cancel_reservation", {"reservation_id": "EHGLP3"}).error
    assert db.reservations._owned == {"EHGLP3"} and not db.users._owned and not db.flights._owned
    assert dict.__getitem__(db.reservations, "EHGLP3") is not airline.cow.base.reservations["EHGLP3"]
