"""Two stores logging to one tracking store never share an MLflow run: a run is found by its run id and its store
(the same run id on two stores, or two prefixes of a bucket, is two runs); a run logged before runs named their
store is adopted by the first store that resumes it."""
from __future__ import annotations

from evosyn.storage.records import Run
from evosyn.storage.tracking import STORE_TAG, Tracker


def _run(run_id: str = "airline-evosyn-s0-abc123") -> Run:
    return Run(run_id=run_id, round=0, domain="airline", rounds=2, budget=8)


def test_the_same_run_id_on_two_stores_is_two_mlflow_runs(tmp_path):
    uri = f"sqlite:///{tmp_path / 'shared.db'}"
    a = Tracker(tmp_path / "a", uri, store="s3://bucket/team-a")
    b = Tracker(tmp_path / "b", uri, store="s3://bucket/team-b")
    parent_a, parent_b = a.start_run(_run()), b.start_run(_run())
    assert parent_a != parent_b
    round_a, round_b = a.start_round(parent_a, _run().run_id, 1), b.start_round(parent_b, _run().run_id, 1)
    assert round_a != round_b
    a.mark_logged(round_a)
    assert not b.is_logged(round_b)  # b's round 1 is not "already logged" by a's
    # a resume on either store finds its own
    again = Tracker(tmp_path / "a2", uri, store="s3://bucket/team-a")
    assert again.start_run(_run()) == parent_a and again.start_round(parent_a, _run().run_id, 1) == round_a
    assert b.client.get_run(parent_b).data.tags[STORE_TAG] == "s3://bucket/team-b"


def test_a_run_logged_before_stores_were_named_is_adopted_once(tmp_path):
    uri = f"sqlite:///{tmp_path / 'shared.db'}"
    a = Tracker(tmp_path / "a", uri, store=str(tmp_path / "a"))
    old = a.client.create_run(a.experiment_id, run_name="r",
                              tags={"evosyn.run_id": _run().run_id, "evosyn.level": "run"}).info.run_id
    assert a.start_run(_run()) == old  # the store that resumes it first: its run
    assert a.client.get_run(old).data.tags[STORE_TAG] == str(tmp_path / "a")
    b = Tracker(tmp_path / "b", uri, store=str(tmp_path / "b"))
    assert b.start_run(_run()) != old  # now another store's
