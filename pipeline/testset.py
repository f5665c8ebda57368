"""The fixed embedded test set: one synthesis pass (pipeline/synthesis.py) in a run partition of its own."""
from __future__ import annotations

from agents.designer import NewFactor
from agents.learners.harness import TaskCase
from envs.ontology import load_initial_space
from envs.packs import default_domain
from pipeline.datasets import cases_for, with_count_factors
from pipeline.stages import Ctx
from pipeline.synthesis import run_pass
from storage.locks import store_lock
from storage.records import TABLES
from storage.store import Store

TEST_SEED = 20_260_101
TEST_SET_STAGE = "testset"
# the chunks of its pass: fixed, so a test set is the same files whatever chunk_size the run that built it had
TEST_SET_CHUNK_SIZE = 50
LEGACY_CHUNK = "testset"  # the single chunk a test set was written as before it ran the pipeline's stages


def test_set_run_id(domain: str, seed: int = TEST_SEED, n: int = 200) -> str:
    return f"testset-{domain}-s{seed}-n{n}"


def test_cases(store: Store, domain: str | None = None, n: int = 200, seed: int = TEST_SEED) -> list[TaskCase]:
    """The fixed embedded test set: built once (num_write uniform, num_read drawn uniformly), then reused.

    It lives in its own run partition and is never read by synthesis. It is
    built only when its completion marker is missing: tasks alone (a build that
    died before its trajectories and verdicts) are never taken as a test set
    without observed factors; the build resumes, as any pass does.
    """
    domain = domain or default_domain()
    run_id = test_set_run_id(domain, seed, n)
    if not store.is_complete(TEST_SET_STAGE, run_id, 0):
        with store_lock(store.root, run_id):  # concurrent first runs: one builds it, the others wait ...
            if not store.is_complete(TEST_SET_STAGE, run_id, 0):  # ... and find it built
                build_test_set(store, domain, n, seed)
    tasks = store.read_records("tasks", run_id=run_id)
    return cases_for(store, run_id, {t.task_id for t in tasks})


def build_test_set(store: Store, domain: str, n: int = 200, seed: int = TEST_SEED) -> None:
    """Build (or finish a partial build of) the test set, then mark it.

    Embedded roles only; no SFT examples (it is never training data). Its one
    crash point, ``testset``, sits where a crash hurts most: its tasks on disk,
    their trajectories and verdicts (the observed factors) not yet.
    """
    run_id = test_set_run_id(domain, seed, n)
    for table in TABLES:  # a partial build of the one-chunk layout before the stages: its rows would stay beside
        store.remove_chunk(table, run_id, 0, LEGACY_CHUNK)
    ctx = Ctx(store, run_id, 0, seed, domain, diagnostic_fraction=None, source="test_set",
              fault_points={"generate": "testset"})
    space = with_count_factors(load_initial_space(domain, run_id=run_id))
    result = run_pass(ctx, space, NewFactor(factor="num_write"), n, chunk_size=TEST_SET_CHUNK_SIZE)
    store.mark_complete(TEST_SET_STAGE, run_id, 0, n_tasks=len(result.tasks))
