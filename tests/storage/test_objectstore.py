"""A store on S3 (``s3://bucket/prefix``) against a real SeaweedFS on 127.0.0.1 (tests/s3server.py): the same
records, counts, markers, checks and queries as a local store of the same writes."""
from __future__ import annotations

import hashlib
import json
import socket
import time

import psutil
import pytest

from evosyn.storage import objectstore
from evosyn.storage.catalog import query_rows
from evosyn.storage.chunks import check, invalidate, markers, quarantine
from evosyn.storage.digest import table_digests
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store, StoreFault
from tests import s3server
from tests.storage.samples import samples


def _fill(store: Store) -> None:
    for rec in samples().values():
        store.write([rec], "c1")
    store.write([samples(round=2)["tasks"]], "c1")
    store.mark_complete("generate", "run-a", 1, "c1", since_ns=None, note="x")


@pytest.fixture
def both(tmp_path, s3_root):
    local, remote = Store(tmp_path / "local-store"), Store(s3_root)
    for st in (local, remote):
        _fill(st)
    return local, remote


def test_an_s3_store_holds_what_a_local_store_holds(both):
    local, remote = both
    assert remote.remote and not local.remote
    assert remote.runs() == local.runs() == ["run-a"]
    for table in TABLES:
        assert remote.read_records(table) == local.read_records(table), table
        assert remote.count(table) == local.count(table)
        assert remote.read(table).equals(local.read(table)), table
    assert remote.read_chunk("tasks", "run-a", 2, "c1") == local.read_chunk("tasks", "run-a", 2, "c1")
    assert remote.read_fields("tasks", ["task_id", "round"]) == local.read_fields("tasks", ["task_id", "round"])
    assert table_digests(remote, ["run-a"]) == table_digests(local, ["run-a"])
    assert remote.is_complete("generate", "run-a", 1, "c1") and not remote.is_complete("generate", "run-a", 2, "c1")
    for sql in ("select run_id, round, count(*) as n from tasks group by all order by all",
                "select count(*) from llm_calls", "select verdict_id, passed from verdicts"):
        assert query_rows(sql, remote) == query_rows(sql, local), sql


def test_each_chunk_is_one_whole_object_and_the_marker_vouches_for_its_bytes(both):
    _, remote = both
    (path,) = remote.files("tasks", "run-a", 1)
    assert str(path).startswith(remote.location + "/tables/tasks/run_id=run-a/round=1/")
    marker = remote.marker_path("generate", "run-a", 1, "c1")
    info = json.loads(marker.read_text())
    want = info["files"]["tasks/c1.parquet"]
    assert want == {"rows": 1, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert info["note"] == "x" and objectstore.head(marker)["size"] == len(marker.read_bytes())
    assert not [p for p in remote.tables_dir.glob("**/*") if ".tmp" in p.name]  # no temp object, no rename
    assert [m[1:] for m in markers(remote)] == [("run-a", 1)]


def test_a_marker_vouches_only_for_files_written_since_its_stage_began(s3_root):
    st = Store(s3_root)
    st.write([samples()["tasks"]], "c1")  # an earlier stage's file of the same chunk name
    time.sleep(0.2)
    began = time.time_ns()
    st.write([samples()["verdicts"]], "c1")
    st.mark_complete("verify", "run-a", 1, "c1", since_ns=began)
    files = json.loads(st.marker_path("verify", "run-a", 1, "c1").read_text())["files"]
    assert sorted(files) == ["verdicts/c1.parquet"]


def test_store_check_names_a_damaged_object_and_invalidate_makes_it_redone(both):
    _, remote = both
    unmarked = remote.partition_dir("tasks", "run-a", 2) / "c1.parquet"  # `_fill` wrote it without a marker
    data = unmarked.read_bytes()
    assert [(p.path, p.unvouched) for p in check(remote)] == [(unmarked, True)]
    (moved,) = quarantine(remote, check(remote))  # out of the tables, kept under quarantine/
    assert not unmarked.exists() and moved.read_bytes() == data
    assert str(moved) == remote.location + "/quarantine/tasks/run_id=run-a/round=2/c1.parquet"
    assert check(remote) == []
    (path,) = remote.files("tasks", "run-a", 1)
    objectstore.put(path, path.read_bytes()[:-20])  # a truncated object (another tool's partial upload)
    (problem,) = check(remote)
    assert problem.path == path and "truncated" in problem.what and problem.run_id == "run-a"
    with pytest.raises(StoreFault, match="unreadable chunk file"):
        remote.read_records("tasks", run_id="run-a", round=1)
    invalidate([problem])
    assert not path.exists() and not remote.is_complete("generate", "run-a", 1, "c1")
    assert check(remote) == []


def test_rewrite_remove_and_delete_leave_exactly_what_a_local_store_leaves(both):
    local, remote = both
    for st in (local, remote):
        st.write([samples()["verdicts"]], "c1")  # the same chunk again: one copy
        st.remove_chunk("tasks", "run-a", 2, "c1")
        assert st.count("verdicts") == 1 and st.count("tasks") == 1
        assert not st.has_chunk("tasks", "run-a", 2, "c1") and st.has_chunk("tasks", "run-a", 1, "c1")
        st.delete_run("run-a")
        assert st.runs(any_table=True) == [] and markers(st) == []
        assert all(st.count(t) == 0 for t in TABLES)
    assert query_rows("select count(*) from tasks", remote) == query_rows("select count(*) from tasks", local)


def test_a_store_opened_elsewhere_sees_the_writes_at_once(s3_root):
    """No listing cache: another process (here: another Store on the same prefix) sees each chunk at once."""
    reader, writer = Store(s3_root), Store(s3_root)
    assert reader.count("tasks") == 0
    writer.write([samples()["tasks"]], "c1")
    assert reader.count("tasks") == 1 and reader.runs(any_table=True) == ["run-a"]
    assert query_rows("select count(*) from tasks", reader).rows == [(1,)]


def test_the_local_folder_and_the_location_of_an_s3_store(s3_root, tmp_path, monkeypatch):
    st = Store(s3_root + "/")
    assert st.location == s3_root and st.where() == s3_root
    bucket, prefix = s3_root.split("/", 3)[2:]
    assert st.root == tmp_path / "local" / bucket / prefix  # under EVOSYN_LOCAL_HOME (tests/s3server.py's s3_root)
    other = Store(f"s3://{bucket}/elsewhere")
    assert other.root == tmp_path / "local" / bucket / "elsewhere"  # one folder per store: never shared
    monkeypatch.delenv("EVOSYN_LOCAL_HOME")
    assert objectstore.local_home(s3_root).parts[-4:] == ("s3", bucket, s3_root.split("/")[3], "store")
    with pytest.raises(objectstore.S3Error, match="not an S3 bucket name"):
        objectstore.split("s3://Bad_Bucket/x")


def test_the_server_is_stopped_and_gone(tmp_path):
    """What every fixture's finalizer relies on: a stop leaves no process of the server behind."""
    server = s3server.start(tmp_path)
    pids = [server.process.pid, *(c.pid for c in psutil.Process(server.process.pid).children(recursive=True))]
    s3server.stop(server)
    assert server.process.poll() is not None
    assert not [p for p in pids if psutil.pid_exists(p)]
    port = int(server.endpoint.rsplit(":", 1)[1])
    with pytest.raises(ConnectionRefusedError):  # the S3 port answers no more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
