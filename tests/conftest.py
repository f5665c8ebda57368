"""Shared fixtures: an isolated store root per test, quiet offline defaults."""
from __future__ import annotations

import os

import storage.offline  # noqa: F401
import pytest

pytest_plugins = ["tests.fakes.user_packs"]  # the user_registry fixture: a registry that scans a folder of packs


@pytest.fixture
def home(tmp_path, monkeypatch):
    root = tmp_path / "home"
    monkeypatch.setenv("EVOSYN_HOME", str(root))
    return root


@pytest.fixture
def store(home):
    from storage.store import Store

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
