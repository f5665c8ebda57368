"""tasks/reports/browse.py: records by id, the runs overview, the in-memory preview."""
from datetime import datetime, timezone

from evosyn.tasks.reports.browse import find, preview, run_overview
from evosyn.storage.records import Evaluation, Run, Verdict, CheckResult
from evosyn.storage.store import Store


def _eval(run_id: str, round: int, i: int, success: bool, task_set: str = "test") -> Evaluation:
    return Evaluation(run_id=run_id, round=round, evaluation_id=f"e{round}-{task_set}-{i}", task_id=f"t{i}",
                      trajectory_id=f"tr-{round}-{i}", model_version="m", task_set=task_set, success=success,
                      reward=float(success))


def test_a_closed_loop_run_shows_rounds_done_and_its_last_test_success(tmp_path):
    store = Store(tmp_path / "h")
    t0 = datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc)
    store.write([Run(run_id="r1", round=0, domain="retail", arm="static", seed=7, rounds=3, budget=10,
                     status="running", created_at=t0)], "run")
    for rnd in (1, 2):
        store.mark_complete("reflect", "r1", rnd, "reflect-x")
    store.write([_eval("r1", 1, i, i < 1) for i in range(4)], "eval-test")  # round 1: 1/4
    store.write([_eval("r1", 2, i, i < 3) for i in range(4)], "eval-test")  # round 2: 3/4
    store.write([_eval("r1", 2, i, False, "diagnostic") for i in range(4)], "eval-diagnostic")
    store.write([Verdict(run_id="r1", round=1, blueprint_id=f"b{i}", verdict_id=f"v{i}", task_id=f"t{i}",
                         trajectory_id=f"tr{i}", reward=1.0, passed=i != 2, checks=[]) for i in range(5)], "v")
    [row] = run_overview(store)
    assert (row.run_id, row.kind, row.domain, row.arm, row.seed) == ("r1", "run", "retail", "static", 7)
    assert (row.rounds_done, row.rounds_asked, row.status, row.verified) == (2, 3, "running", 4)
    assert (row.test_round, row.test_success, row.created_at) == (2, 0.75, t0)


def test_find_matches_own_ids_and_lineage_ids_but_not_run_ids_downstream(tmp_path):
    store = Store(tmp_path / "h")
    store.write([Run(run_id="x1", round=0, domain="airline", rounds=1, budget=1)], "run")
    v = Verdict(run_id="x1", round=1, blueprint_id="b1", verdict_id="v1", task_id="t1", trajectory_id="tr1",
                reward=0.0, passed=False, checks=[CheckResult(name="state", passed=False, reason="r")])
    store.write([v, v.model_copy(update={"verdict_id": "v2", "attempt": 1})], "v")
    assert [(f.kind, f.record.verdict_id, f.via) for f in find(store, "tr1")] == \
        [("verdict", "v1", "trajectory_id"), ("verdict", "v2", "trajectory_id")]  # by attempt
    assert [f.kind for f in find(store, "x1")] == ["run"]  # a run id is not every record of the run
    assert find(store, "v2")[0].record == v.model_copy(update={"verdict_id": "v2", "attempt": 1})
    assert find(store, "nope") == [] and find(store, "' or 1=1 --") == []


def test_preview_is_the_synth_pass_of_the_same_inputs_and_leaves_nothing(tmp_path, monkeypatch):
    import tempfile

    from evosyn.envs.packs import get_domain

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    airline = get_domain("airline")
    samples = preview(airline, 4, seed=3)
    assert len(samples) == 4 and list(tmp_path.iterdir()) == []  # its temporary store is gone
    assert [s.blueprint.blueprint_id for s in samples] == [s.blueprint.blueprint_id for s in preview(airline, 4, 3)]
    for s in samples:
        assert s.task is None or s.task.blueprint_id == s.blueprint.blueprint_id
        if s.verdict is not None and s.trajectory is not None:
            assert s.verdict.trajectory_id == s.trajectory.trajectory_id
    assert any(s.verdict is not None and s.verdict.passed for s in samples)
