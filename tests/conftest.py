"""Shared fixtures: an isolated store root per test, quiet offline defaults."""
from __future__ import annotations

import os

import evosyn.storage.offline  # noqa: F401
import pytest

# pytest-xdist's workers export COLUMNS=80 and LINES=24 (their own terminal's size): `evosyn` reads COLUMNS as a
# terminal's width (flows/render.py), so every command a worker starts would wrap its tables to 80 columns, unlike
# the same test run alone. The suite runs as a pipe does; a test of a width sets COLUMNS itself.
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)

pytest_plugins = ["tests.fakes.user_packs",  # the user_registry fixture: a registry that scans a folder of packs
                  "tests.s3server",  # s3_server, s3_env, s3_root: a real SeaweedFS on 127.0.0.1, started on first use
                  "tests.postgres_server",  # pg_server: a real PostgreSQL per session
                  "tests.prefect_server"]  # SHARED_PREFECT_API = True: a module's runs share one Prefect server


def pytest_report_header(config):
    """The official task sets this suite's official-task tests run on, named as every official score names its
    own (tests/envs/test_task_sets.py pins them)."""
    from evosyn.envs.packs import get_pack, known
    from evosyn.envs.tau2.pack import Tau2Pack

    packs = [get_pack(name) for name in known(with_environment=True)]
    return [f"official tasks: {p.task_set().label}" for p in packs if isinstance(p, Tau2Pack)]


@pytest.fixture
def home(tmp_path, monkeypatch):
    root = tmp_path / "home"
    monkeypatch.setenv("EVOSYN_HOME", str(root))
    return root


@pytest.fixture
def store(home):
    from evosyn.storage.store import Store

    return Store(home)


@pytest.fixture(autouse=True)
def _no_network_env(monkeypatch):
    # Anything that would try a remote endpoint fails fast instead of hanging.
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")
    # mlflow.set_tracking_uri exports MLFLOW_TRACKING_URI, which every later Tracker (and process) would obey
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield
    os.environ.pop("EVOSYN_TEST_SENTINEL", None)
    # monkeypatch undoes only what it changed: a variable absent at setup and exported during the test (by
    # mlflow.set_tracking_uri) would outlive it, and point later module fixtures at a removed tmp_path store
    os.environ.pop("MLFLOW_TRACKING_URI", None)
