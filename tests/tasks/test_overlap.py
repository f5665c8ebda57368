"""tasks/overlap.py: the share of the training tasks that copy test-set tasks, beside every score, and the warning
above ``OVERLAP_WARN`` (issue 59, item 2); the scored set of a domain with no official tasks (item 1)."""
from __future__ import annotations

import math

import pytest

from evosyn.config import RunConfig
from evosyn.envs.packs import get_domain
from evosyn.storage.audit_records import DedupCheck
from evosyn.storage.records import Run
from evosyn.storage.store import Store
from evosyn.tasks import testset
from evosyn.tasks.overlap import OVERLAP_WARN, overlap, overlap_warnings, score_line, scored_metrics

N = 10  # test set size


@pytest.fixture
def gym(tmp_path, user_registry):
    """The template pack without official tasks, its uniform test set of N built in a fresh store."""
    from evosyn.flows.cli_new_domain import write_pack

    env = write_pack("gym_overlap", tmp_path / "packs") / "environment.py"
    env.write_text(env.read_text().replace("OFFICIAL = [", "OFFICIAL = []\n_UNUSED = ["))
    user_registry(tmp_path / "packs")
    store, dom = Store(tmp_path / "home"), get_domain("gym_overlap")
    members = testset.test_cases(store, dom, n=N, kind="uniform")
    assert len(members) == N
    return store, dom, testset.test_set_run_id(dom, n=N, kind="uniform")


def _run(store: Store, drop: bool = False) -> str:
    cfg = RunConfig(domain="gym_overlap", test_size=N, rounds=2, dedup={"drop": drop})
    store.write([Run(run_id="r1", round=0, domain="gym_overlap", rounds=2, budget=20,
                     config_json=cfg.model_dump_json())], "run")
    return "r1"


def _checks(run_id: str, round: int, n: int, copies: int, set_id: str, split: str = "train") -> list[DedupCheck]:
    """``n`` checked tasks of a round, the first ``copies`` flagged as near copies of a task of ``set_id``."""
    return [DedupCheck(run_id=run_id, round=round, task_id=f"t{round}-{split}-{i}", split=split,
                       **({"flags": ["test_set"], "flagged": True, "test_set": set_id, "test_set_task": "x"}
                          if i < copies else {})) for i in range(n)]


def test_the_share_of_copies_counts_the_training_tasks_of_the_rounds_so_far(gym):
    store, dom, set_id = gym
    run_id = _run(store)
    store.write(_checks(run_id, 1, 20, 5, set_id) + _checks(run_id, 1, 6, 6, set_id, split="diagnostic"), "dedup")
    store.write(_checks(run_id, 2, 20, 1, set_id), "dedup")
    one, two = overlap(store, dom, run_id, 1), overlap(store, dom, run_id, 2)
    # diagnostic tasks are not trained on; round 2 adds 20 tasks, 1 a copy
    assert (one["overlap_test_uniform"], one["overlap_trained"], one["overlap_flagged"]) == (0.25, 20, 5)
    assert two["overlap_test_uniform"] == two["overlap_test_sets"] == 6 / 40
    assert math.isnan(one["overlap_test"])  # no official tasks: no official-matched set to copy
    assert overlap_warnings(two, "round 2: ") == [
        "warning: round 2: 15% of the training tasks (6 of 40) are near copies of test-set tasks (uniform 15%; "
        "threshold 10%): the test scores overstate what the learner generalizes; `dedup.drop: true` trains without "
        "them, a larger database gives more distinct tasks (docs/guides/dedup.md)"]
    store.write(_checks(run_id, 3, 40, 0, set_id), "dedup")  # diluted to 6 of 80, under the threshold: no warning
    three = overlap(store, dom, run_id, 3)
    assert three["overlap_test_sets"] == 6 / 80 <= OVERLAP_WARN and overlap_warnings(three) == []


def test_a_run_that_drops_the_flagged_tasks_trains_on_no_copy(gym):
    store, dom, set_id = gym
    run_id = _run(store, drop=True)
    store.write(_checks(run_id, 1, 20, 5, set_id), "dedup")
    m = overlap(store, dom, run_id, 1)
    assert (m["overlap_test_uniform"], m["overlap_trained"]) == (0.0, 15) and overlap_warnings(m) == []


def test_a_test_set_full_of_duplicates_is_warned_about(gym):
    store, dom, set_id = gym
    run_id = _run(store)
    store.write([DedupCheck(run_id=set_id, round=0, task_id=f"s{i}", source="test_set",
                            **({"flags": ["duplicate"], "flagged": True, "duplicate_of": "s0"} if i in (3, 7) else {}))
                 for i in range(N)], "dedup")
    m = overlap(store, dom, run_id)
    assert m["duplicates_test_uniform"] == 0.2 and math.isnan(m["duplicates_test"])
    assert overlap_warnings(m) == [
        "warning: 20% of the uniform test set's tasks are near copies of its other tasks (threshold 10%): its score "
        "counts the same questions more than once; a larger database gives more distinct tasks "
        "(docs/guides/dedup.md)"]


def test_the_scored_set_is_the_uniform_one_without_an_official_matched_set():
    official = {"success_test": 0.5, "success_test_uniform": 0.7, "overlap_test": 0.02, "overlap_test_uniform": 0.01}
    assert scored_metrics(official) == {"success_test_scored": 0.5, "test_set_scored": "official-matched"}
    assert score_line(official) == "test 0.500 (overlap 2%), test uniform 0.700 (overlap 1%)"
    uniform = {"success_test_uniform": 0.9, "overlap_test_uniform": 0.136}
    assert scored_metrics(uniform) == {"success_test_scored": 0.9, "test_set_scored": "uniform"}
    assert score_line(uniform) == "test (uniform) 0.900 (overlap 14%)"
    assert score_line({"success_test": float("nan"), "success_test_uniform": 0.9}) == "test (uniform) 0.900"
