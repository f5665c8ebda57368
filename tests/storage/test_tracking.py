import json
import os

import pytest

from evosyn.storage.tracking import Tracker
from tests.storage.samples import samples


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    import mlflow

    os.environ.pop("MLFLOW_TRACKING_URI", None)  # module fixtures run before the per-test env cleanup
    root = tmp_path_factory.mktemp("mlroot")
    tracker = Tracker(root)
    s = samples()
    parent = tracker.start_run(s["runs"])
    rounds = []
    for r in (1, 2, 3):
        rid = tracker.start_round(parent, "run-a", r)
        tracker.log_metrics(rid, {"success_test": 0.1 * r, "verified_yield": 0.9}, step=r)
        rounds.append(rid)
    tracker.log_space(rounds[1], s["spaces"])
    tracker.finish(parent)
    return tracker, parent, rounds, mlflow


def test_uses_a_local_sqlite_store(tracked):
    tracker, *_ = tracked
    assert tracker.uri.startswith("sqlite:///") and tracker.uri.endswith("mlflow.db")


def test_parent_and_nested_rounds_are_searchable(tracked):
    tracker, parent, rounds, mlflow = tracked
    mlflow.set_tracking_uri(tracker.uri)
    df = mlflow.search_runs(experiment_names=["evosyn"])
    nested = df[df["tags.mlflow.parentRunId"] == parent]
    assert sorted(nested["run_id"]) == sorted(rounds)
    assert sorted(nested["metrics.success_test"].round(3)) == [0.1, 0.2, 0.3]
    top = df[df["run_id"] == parent].iloc[0]
    assert top["params.domain"] == "airline" and top["params.arm"] == "evosyn"


def test_space_artifact_downloads_unchanged(tracked, tmp_path):
    tracker, parent, rounds, mlflow = tracked
    path = mlflow.artifacts.download_artifacts(run_id=rounds[1], artifact_path="spaces/space_v2.json",
                                               dst_path=str(tmp_path), tracking_uri=tracker.uri)
    data = json.loads(open(path).read())
    assert data["version"] == 2 and data["factors"][0]["key"] == "num_write"


def test_resume_reuses_existing_runs(tracked):
    tracker, parent, rounds, _ = tracked
    assert tracker.start_run(samples()["runs"]) == parent
    assert tracker.start_round(parent, "run-a", 2) == rounds[1]


def _points(tracker, run_id, key):
    return sorted((m.step, m.value) for m in tracker.client.get_metric_history(run_id, key))


def test_logging_again_adds_no_second_point_param_or_artifact(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # mlflow.set_tracking_uri above exports it
    tracker = Tracker(tmp_path)
    parent = tracker.start_run(samples()["runs"])
    child = tracker.start_round(parent, "run-a", 1)
    s = samples()
    for _ in range(2):  # a resume repeating a round's logging
        tracker.log_metrics(child, {"success_test": 0.5, "5+": 1.0}, step=1)
        tracker.log_params(child, {"steering": "cold_start", "space_version_in": 1})
        tracker.log_space(child, s["spaces"])
        tracker.log_json(child, "directions.json", [{"a": 1}])
    tracker.log_metrics(child, {"success_test": 0.7}, step=2)  # a new step still lands
    assert _points(tracker, child, "success_test") == [(1, 0.5), (2, 0.7)]
    assert _points(tracker, child, "5plus") == [(1, 1.0)]
    assert tracker.client.get_run(child).data.params == {"steering": "cold_start", "space_version_in": "1"}
    names = [f.path for f in tracker.client.list_artifacts(child)] + \
        [f.path for f in tracker.client.list_artifacts(child, "spaces")]
    assert sorted(names) == ["directions.json", "spaces", "spaces/space_v2.json"]


def test_a_round_is_marked_logged_and_a_resumed_parent_runs_again(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracker = Tracker(tmp_path)
    parent = tracker.start_run(samples()["runs"])
    child = tracker.start_round(parent, "run-a", 1)
    assert not tracker.is_logged(child)
    tracker.mark_logged(child)
    assert tracker.is_logged(child)
    tracker.finish(parent)
    again = Tracker(tmp_path)
    assert again.start_run(samples()["runs"]) == parent
    assert again.client.get_run(parent).info.status == "RUNNING"


def test_the_experiment_is_a_machine_learning_one_with_a_rounds_view(tracked):
    from evosyn.storage.tracking import KIND_TAG, NOTE_TAG, VIEW_TAG, rounds_view_path

    tracker, _, rounds, _ = tracked
    tags = tracker.client.get_experiment(tracker.experiment_id).tags
    assert tags[KIND_TAG] == "custom_model_development"
    path = rounds_view_path(tracker.experiment_id)
    assert path == (f"#/experiments/{tracker.experiment_id}/runs?viewStateShareKey=evosyn-rounds"
                    "&workflowType=machine_learning")
    assert f"]({path})" in tags[NOTE_TAG]  # the experiment's description links to the view
    view = json.loads(tags[VIEW_TAG])
    # round runs only, sorted by name (a start-time sort would nest them under collapsed parents)
    assert view["searchFilter"] == "tags.`evosyn.level` = 'round'"
    assert view["orderByKey"] == "tags.`mlflow.runName`" and view["orderByAsc"] is True
    assert view["selectedColumns"] == ["tags.`evosyn.arm`", "tags.`evosyn.domain`", "tags.`evosyn.round`",
                                       "metrics.`success_test`", "metrics.`verified_yield`"]
    # the columns the view names are on the round runs: the parent's arm and domain, the round
    round_tags = tracker.client.get_run(rounds[0]).data.tags
    assert (round_tags["evosyn.arm"], round_tags["evosyn.domain"], round_tags["evosyn.round"]) == \
        ("evosyn", "airline", "1")


def test_the_rounds_view_gains_headline_metrics_only_and_keeps_what_others_added(tmp_path, monkeypatch):
    from evosyn.storage.tracking import VIEW_TAG

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    first, second = Tracker(tmp_path), Tracker(tmp_path)  # two runs of one store, each its own Tracker
    parent = first.start_run(samples()["runs"])
    first.log_metrics(parent, {"parent_only": 1.0}, step=1)  # a parent's metric is no round column
    first.log_metrics(first.start_round(parent, "run-a", 1), {"success_test": 0.5, "success_test.num_write.0": 1.0})
    second.log_metrics(second.start_round(parent, "run-a", 2), {"factor_coverage": 0.4, "success_test": 0.6})

    def columns() -> list[str]:
        return json.loads(first.client.get_experiment(first.experiment_id).tags[VIEW_TAG])["selectedColumns"][3:]

    assert columns() == ["metrics.`success_test`", "metrics.`factor_coverage`"]
    first.log_metrics(first.start_round(parent, "run-a", 3), {"success_test": 0.7})  # nothing new: kept
    assert columns() == ["metrics.`success_test`", "metrics.`factor_coverage`"]


def test_an_older_experiment_gets_the_tags_and_a_users_note_stays(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from evosyn.storage.tracking import KIND_TAG, NOTE_TAG, VIEW_TAG, default_tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    client = MlflowClient(tracking_uri=default_tracking_uri(tmp_path))
    exp = client.create_experiment("evosyn", tags={NOTE_TAG: "my notes"})  # as made before the tags existed
    tracker = Tracker(tmp_path)
    tags = client.get_experiment(exp).tags
    assert tracker.experiment_id == exp and tags[NOTE_TAG] == "my notes"
    assert tags[KIND_TAG] == "custom_model_development" and json.loads(tags[VIEW_TAG])["selectedColumns"]
