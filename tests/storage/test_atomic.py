"""Atomic writes: a crash mid-write leaves the old file whole and no temp file behind."""
from __future__ import annotations

import json
import logging
import os

import pytest

from evosyn.storage import atomic


def test_text_bytes_and_json_land_whole(tmp_path):
    assert atomic.write_text(tmp_path / "a" / "x.txt", "héllo").read_text() == "héllo"
    assert atomic.write_bytes(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    assert json.loads(atomic.write_json(tmp_path / "c.json", {"z": 1, "a": 2}).read_text()) == {"z": 1, "a": 2}
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b.bin", "c.json", "x.txt"]


def test_a_writer_that_dies_leaves_the_old_file_and_no_litter(tmp_path):
    path = tmp_path / "model.joblib"
    atomic.write_bytes(path, b"old model")
    with pytest.raises(RuntimeError):
        with atomic.atomic_path(path) as tmp:
            tmp.write_bytes(b"half a new mod")  # a library (joblib, matplotlib) writing to the temp path...
            raise RuntimeError("killed mid-dump")  # ...dies before it finishes
    assert path.read_bytes() == b"old model"
    assert os.listdir(tmp_path) == ["model.joblib"]


def test_a_value_that_cannot_be_serialised_writes_nothing(tmp_path):
    path = tmp_path / "summary.json"
    atomic.write_json(path, {"ok": 1})
    with pytest.raises(TypeError):
        atomic.write_json(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": 1} and os.listdir(tmp_path) == ["summary.json"]


def test_temp_files_are_invisible_to_artifact_globs(tmp_path):
    path = tmp_path / "c1.parquet"
    with atomic.atomic_path(path) as tmp:
        tmp.write_bytes(b"x")
        assert not list(tmp_path.glob("*.parquet")) and tmp.parent == tmp_path  # same folder: rename is atomic
    assert [p.name for p in tmp_path.glob("*.parquet")] == ["c1.parquet"]


def test_an_unreadable_artifact_reads_as_missing_with_one_warning(tmp_path, caplog):
    path = tmp_path / "state.json"
    assert atomic.read_or_none(path, lambda p: json.loads(p.read_text())) is None  # missing: silent
    assert not caplog.records
    path.write_text('{"truncat')
    with caplog.at_level(logging.WARNING, logger="evosyn.storage"):
        assert atomic.read_or_none(path, lambda p: json.loads(p.read_text()), "services state") is None
    assert len(caplog.records) == 1 and "services state" in caplog.text and str(path) in caplog.text
