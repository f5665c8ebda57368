"""Spans of tasks/timing.py: off by default; on, each keeps its wall, thread CPU, process CPU and what it is inside."""
from __future__ import annotations

import threading
import time

import pytest

from evosyn.tasks import timing


@pytest.fixture
def recording(tmp_path, monkeypatch):
    path = tmp_path / "timing.json"
    monkeypatch.setenv(timing.ENV, str(path))
    monkeypatch.setattr(timing, "_spans", [])
    monkeypatch.setattr(timing, "_marks", {})
    return path


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_off_records_nothing(monkeypatch):
    monkeypatch.delenv(timing.ENV, raising=False)
    monkeypatch.setattr(timing, "_spans", [])
    with timing.span("fn", "verify", 1):
        _spin(0.01)
    timing.mark("x")
    assert timing.recorded() == {"spans": [], "marks": {}} and timing.dump() is None


def test_spans_nest_per_thread_and_keep_their_own_cpu(recording):
    def worker():
        with timing.span("fn", "rollout", 2):  # another thread: inside nothing, whatever the main thread does
            _spin(0.05)

    with timing.span("task", "verify", 2):
        with timing.span("fn", "verify", 2):
            with timing.span("own", "store.write", 2):
                _spin(0.02)
            t = threading.Thread(target=worker)
            t.start()
            t.join()
    timing.mark("done")
    timing.mark("done")  # the first time counts
    spans = {s["name"] if s["kind"] != "task" else "task": s for s in timing.dump()
             and timing.load(recording)["spans"]}
    assert spans["store.write"]["under"] == ["task:verify", "fn:verify"]
    assert spans["verify"]["under"] == ["task:verify"] and spans["rollout"]["under"] == []
    assert spans["rollout"]["cpu"] >= 0.05 and spans["verify"]["cpu"] < 0.05  # thread CPU: not the worker's
    assert spans["task"]["pcpu"] >= 0.07  # process CPU: both threads
    assert spans["task"]["start"] <= spans["verify"]["start"] <= spans["verify"]["end"] <= spans["task"]["end"]
    assert list(timing.load(recording)["marks"]) == ["done"]
