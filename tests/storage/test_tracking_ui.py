"""The MLflow 3.17 UI shows the experiment's rounds view: round runs flat, their metrics as columns.

A real MLflow server on the store a Tracker wrote, read by headless Chromium (the browser harness of
tests/flows/test_e2e_ui.py). From the experiment's default page, the link in its description opens the
view; the view lists each round as a row with the headline metrics as columns. Screenshots go to
``$EVOSYN_TEST_ARTIFACTS`` (default: the test's tmp dir).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from evosyn.storage.tracking import Tracker, rounds_view_path
from tests.flows.test_e2e_ui import Page, _browser_or_skip, free_ports
from tests.storage.samples import samples

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def mlflow_ui(tmp_path, monkeypatch):
    """A tracked run of two rounds and an MLflow server (UI) on its store."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracker = Tracker(tmp_path / "root")
    parent = tracker.start_run(samples()["runs"])
    for r in (1, 2):
        child = tracker.start_round(parent, "run-a", r)
        tracker.log_metrics(child, {"success_test": 0.25 * r, "factor_coverage": 0.5 + 0.125 * r,
                                    "success_test.num_write.0": 1.0}, step=r)
        tracker.finish(child)
    tracker.finish(parent)
    (port,) = free_ports(1)
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1", "--backend-store-uri", tracker.uri],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the MLflow server did not start"
                time.sleep(0.5)
        yield url, tracker.experiment_id
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (it runs its workers as children), SIGKILL if it is still up after 30 s
    (on a loaded machine it was once still up 30 s after SIGTERM: the teardown failed)."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            server.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
    server.wait(timeout=10)


def test_the_experiment_page_links_to_the_rounds_table_with_metric_columns(mlflow_ui, tmp_path):
    _browser_or_skip()
    url, exp = mlflow_ui
    shots = Path(os.environ.get("EVOSYN_TEST_ARTIFACTS") or tmp_path / "screenshots")  # as test_e2e_ui.py
    shots.mkdir(parents=True, exist_ok=True)
    page = Page(shots)
    try:
        page.open(f"{url}/#/experiments/{exp}", ["Round metrics as columns"], "mlflow-experiment-note")
        link = page.driver.find_element("link text", "Round metrics as columns")
        assert link.get_attribute("href") == f"{url}/{rounds_view_path(exp)}"
        tabs = set(page.driver.window_handles)
        page.driver.execute_script("arguments[0].click();", link)  # a new tab: MLflow opens links so
        deadline = time.monotonic() + 10
        while set(page.driver.window_handles) == tabs and time.monotonic() < deadline:
            time.sleep(0.2)
        new = set(page.driver.window_handles) - tabs
        if new:
            page.driver.switch_to.window(new.pop())
        body = page.wait_for(["run-a/round-1", "run-a/round-2", "2 matching runs", "success_test",
                              "factor_coverage", "evosyn.arm"], "mlflow-rounds-view")
        assert page.driver.current_url.startswith(f"{url}/{rounds_view_path(exp)}")
        assert "0.25" in body and "0.75" in body  # the rounds' own values, one row each
        assert "success_test.num_write.0" not in body  # per-slice metrics stay under Columns
    finally:
        page.close()
