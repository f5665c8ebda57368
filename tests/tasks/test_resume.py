"""SIGKILL at every stage boundary, then resume: every table equals an uninterrupted run's, row for row (slow).

The run is tests/tasks/driver.py (round_flow's stages, without Prefect or MLflow),
in a subprocess killed by ``EVOSYN_FAULT_KILL_AT`` (storage/faults.py).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from evosyn.storage.digest import normalized_rows, table_digests
from evosyn.storage.faults import ENV, POINTS
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
import evosyn.tasks.testset as testset
from evosyn.envs.packs import get_domain
from tests.tasks.driver import RUN_ID, TINY

pytestmark = pytest.mark.slow
RUNS = [RUN_ID, *(testset.test_set_run_id(get_domain("airline"), n=TINY["test_size"], kind=k) for k in testset.KINDS)]
# the stage driver has no MLflow (tests/flows/test_resume.py kills inside MLflow's first initialisation)
KILLS = [p for p in POINTS if p not in ("reflect", "mlflow-init")] + ["reflect@1", "reflect@2", "generate@2"]


def drive(root, kill: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if kill:
        env[ENV] = kill
    return subprocess.run([sys.executable, "-m", "tests.tasks.driver", str(root)], env=env, timeout=600,
                          capture_output=True, text=True).returncode


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean")
    assert drive(root) == 0
    return table_digests(Store(root, create=False), RUNS)


@pytest.mark.parametrize("kill", KILLS)
def test_killed_then_resumed_equals_uninterrupted(tmp_path, clean, kill):
    root = tmp_path / "killed"
    assert drive(root, kill) == -signal.SIGKILL, f"{kill}: the run was not killed there"
    assert drive(root) == 0
    store = Store(root, create=False)
    got = table_digests(store, RUNS)
    differ = [t for t in TABLES if got[t] != clean[t]]
    assert not differ, f"{kill}: tables differ from the uninterrupted run: {differ} " \
                       f"({ {t: len(normalized_rows(store, t, RUNS)) for t in differ} } rows)"
