"""The verifier's checks on official gold trajectories and on perturbed copies (no tau2 evaluator)."""
import pytest

from evosyn.envs.gold import AFFIRMATIVE, gold_messages
from evosyn.envs.perturb import perturb
from evosyn.envs.verify import run_checks
from evosyn.storage.records import Message, ToolCall
from tests.envs.conftest import with_actions


@pytest.mark.parametrize("name, expected", [("airline", 43), ("retail", 112), ("telecom", 114)])
def test_every_official_gold_trajectory_passes(name, expected, request):
    domain = request.getfixturevalue(name)
    tasks = with_actions(domain)
    assert len(tasks) == expected
    failures = {}
    for task in tasks:
        outcome = run_checks(domain, task, gold_messages(domain, task))
        if not outcome.passed:
            failures[task.id] = [(c.name, c.reason) for c in outcome.checks if not c.passed]
    assert not failures


def failed(outcome):
    return {c.name for c in outcome.checks if not c.passed and not c.skipped}


@pytest.fixture(scope="module")
def task_7(airline):
    return next(t for t in airline.tasks("base") if t.id == "7")


def test_read_dropped_passes_db_but_fails_actions(airline, task_7):
    msgs = perturb(airline, task_7, gold_messages(airline, task_7), "read_dropped")
    out = run_checks(airline, task_7, msgs)
    assert out.reward == 1.0 and failed(out) == {"actions"}  # the false pass of tau2 issue 15


def test_swapped_writes_fail_policy(airline, task_7):
    msgs = perturb(airline, task_7, gold_messages(airline, task_7), "writes_swapped")
    assert "policy" in failed(run_checks(airline, task_7, msgs))


def test_dropped_write_fails_state(airline, task_7):
    out = run_checks(airline, task_7, perturb(airline, task_7, gold_messages(airline, task_7), "write_dropped"))
    assert out.reward == 0.0 and {"state", "actions"} <= failed(out)


def test_tampered_observation_fails_replay(airline, task_7):
    out = run_checks(airline, task_7, perturb(airline, task_7, gold_messages(airline, task_7), "tampered_observation"))
    assert out.reward == 0.0 and "replay" in failed(out)


def test_unconfirmed_write_violates_policy_even_when_db_matches(airline, task_7):
    msgs = [m for m in gold_messages(airline, task_7) if m.content != AFFIRMATIVE]
    out = run_checks(airline, task_7, msgs)
    assert out.reward == 1.0 and failed(out) == {"policy"}
    assert "no explicit user confirmation" in next(c.reason for c in out.checks if c.name == "policy")


def test_official_waiver_is_not_inherited_by_a_copy(airline, task_7):
    copy = airline.task_from_json({k: v for k, v in task_7.to_json().items() if k != "description"})
    out = run_checks(airline, copy, gold_messages(airline, copy))
    assert "cancel_eligibility" in next(c.reason for c in out.checks if c.name == "policy")
    waived = run_checks(airline, task_7, gold_messages(airline, task_7))
    assert "waived cancel_eligibility for official task 7" in next(c.reason for c in waived.checks if c.name == "policy")


def test_basic_economy_flight_change_is_a_violation(airline):
    base = airline.cow.base
    rid = next(r.reservation_id for r in base.reservations.values()
               if r.cabin == "basic_economy" and r.status is None and len(r.flights) == 1)
    res = base.reservations[rid]
    user = base.users[res.user_id]
    card = next(k for k, v in user.payment_methods.items() if v.source in ("credit_card", "gift_card"))
    args = {"reservation_id": rid, "cabin": "basic_economy", "payment_id": card,
            "flights": [{"flight_number": res.flights[0].flight_number, "date": "2024-05-25"}]}
    msgs = [Message(role="user", content=f"Change {rid} to the 25th.", requestor="user"),
            Message(role="assistant", content=f"I will update reservation flights for {rid}. Confirm?"),
            Message(role="user", content="yes", requestor="user"),
            Message(role="assistant", tool_calls=[ToolCall(id="c", name="update_reservation_flights", arguments=args)]),
            Message(role="tool", content="", tool_call_id="c")]
    from evosyn.envs.perturb import rematerialize

    task = next(t for t in airline.tasks("base") if t.id == "0")
    out = run_checks(airline, task, rematerialize(airline, task, msgs))
    assert "basic economy flights cannot be modified" in next(c.reason for c in out.checks if c.name == "policy")


def test_executable_check_names_the_bad_call(airline, task_7):
    msgs = gold_messages(airline, task_7)
    msgs.insert(1, Message(role="assistant", tool_calls=[ToolCall(id="x", name="teleport", arguments={})]))
    msgs.insert(2, Message(role="tool", content="Error: Tool 'teleport' not found.", tool_call_id="x", error=True))
    out = run_checks(airline, task_7, msgs)
    assert "no assistant tool named 'teleport'" in next(c.reason for c in out.checks if c.name == "executable")


def test_premature_termination_gets_reward_zero(airline, task_7):
    assert run_checks(airline, task_7, gold_messages(airline, task_7), termination="max_steps").reward == 0.0


def test_requested_factors_are_checked(airline, task_7):
    msgs = gold_messages(airline, task_7)
    ok = run_checks(airline, task_7, msgs, requested={"num_write": ["3-4"], "num_read": ["2"]})
    bad = run_checks(airline, task_7, msgs, requested={"num_write": ["1"]})
    assert ok.passed and "factors" in failed(bad) and "requested ['1'], observed ['3-4']" in bad.checks[-1].reason


def test_a_stored_gold_digest_replaces_the_gold_replay(airline, task_7, monkeypatch):
    import evosyn.envs.replay as replay
    import evosyn.envs.verify as verify

    stored = replay.gold_digest(airline, task_7)
    assert stored.startswith(airline.digest_scheme + ":")
    msgs = gold_messages(airline, task_7)

    def no_replay(*_):
        raise AssertionError("the gold actions were replayed although the task stores their digest")

    monkeypatch.setattr(verify, "gold_replay", no_replay)
    assert run_checks(airline, task_7, msgs, gold_digest=stored).passed
    wrong = f"{airline.digest_scheme}:{'0' * 64}"
    out = run_checks(airline, task_7, msgs, gold_digest=wrong)
    assert out.reward == 0.0 and failed(out) == {"state"}  # the stored digest is what the state is held to
    monkeypatch.undo()
    # a digest of another form (an older scheme, another tau2) is ignored: the gold actions are replayed
    assert run_checks(airline, task_7, msgs, gold_digest=f"d1/tau2-0.0/airline:{'0' * 64}").passed


def test_synthesized_tasks_store_their_gold_digest(airline):
    from evosyn.agents.verifier import verify
    from evosyn.envs.replay import gold_digest
    from evosyn.storage.records import SynthTask, Trajectory

    task = next(t for t in with_actions(airline) if t.id == "7")
    row = SynthTask(run_id="r", round=0, task_id="7", domain="airline", tau2_task=task.to_json())
    assert row.gold_digest == ""  # rows written before the field existed read back with it empty
    stored = row.model_copy(update={"gold_digest": gold_digest(airline, airline.task_from_json(row.definition))})
    traj = Trajectory(run_id="r", round=0, trajectory_id="t", task_id="7", messages=gold_messages(airline, task))
    assert verify(stored, traj, airline).passed and verify(row, traj, airline).passed
