from evosyn.agents.verifier import verify
from evosyn.envs.gold import gold_messages
from evosyn.envs.packs import get_domain
from evosyn.storage.records import SynthTask, Trajectory


def make(task_id="7", requested=None):
    dom = get_domain("airline")
    task = next(t for t in dom.tasks("base") if t.id == task_id)
    lineage = dict(run_id="r1", round=2, space_version=3, direction_id="d9", blueprint_id="b9")
    synth = SynthTask(**lineage, task_id=f"syn-{task_id}", domain="airline", tau2_task=task.to_json(),
                      requested=requested or {})
    traj = Trajectory(**lineage, trajectory_id="tr1", task_id=synth.task_id, messages=gold_messages(dom, task))
    return synth, traj, dom


def test_verdict_carries_lineage_and_named_checks():
    synth, traj, dom = make("2", {"num_write": ["1"]})
    v = verify(synth, traj, dom)
    assert (v.run_id, v.round, v.space_version, v.direction_id, v.blueprint_id) == ("r1", 2, 3, "d9", "b9")
    assert [c.name for c in v.checks] == ["executable", "replay", "state", "actions", "communicate", "policy", "factors"]
    assert v.reward == 1.0 and v.passed and v.observed["num_write"] == ["1"]


def test_failed_verdict_says_which_check_and_why():
    synth, traj, dom = make("2", {"num_write": ["5+"]})
    v = verify(synth, traj, dom)
    assert not v.passed and [c.name for c in v.failed()] == ["factors"]
    assert "requested ['5+']" in v.failed()[0].reason


def test_verdict_round_trips_through_the_store(store):
    synth, traj, dom = make("2")
    v = verify(synth, traj, dom)
    store.write([v], "c")
    assert store.read_records("verdicts") == [v]
