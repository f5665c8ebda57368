"""Secrets are redacted before anything is written: a key planted in a reply, an error body, a tool result and a
log line appears nowhere under the store root."""
from __future__ import annotations

import logging

import pyarrow as pa
import pytest

import evosyn.storage.redact as redact
from evosyn.agents.llm import LLMRequestError, make_client
from evosyn.agents.llm.calllog import write_calls
from evosyn.benchmarks.fake_llm_server import FakeLLMServer, Reply
from evosyn.benchmarks.hostile_server import HostileServer
from evosyn.config import RoleConfig
from evosyn.storage.store import Store
from tests.storage.samples import samples

KEY = "sk-test-PLANTED-KEY-9f8e7d6c5b4a"


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("EVOSYN_TEST_KEY", KEY)
    monkeypatch.setattr(redact, "_secrets", ())
    yield KEY
    monkeypatch.setattr(redact, "_secrets", ())


def _client(url, root):
    cfg = RoleConfig(backend="llm", provider="openai_compatible", model="m", base_url=url,
                     api_key_env="EVOSYN_TEST_KEY", max_retries=0)
    return make_client("teacher", cfg, cache_dir=root / "llm_cache", run_id="r1", round=1)


def _hits(root, needle):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


def test_a_planted_key_is_nowhere_under_the_root(tmp_path, key):
    root = tmp_path / "home"
    store = Store(root)
    # a reply that quotes the Authorization header: cached and read masked
    with HostileServer("echo-key") as server:
        client = _client(server.base_url, root)
        text = client.chat_sync([{"role": "user", "content": "hi"}]).text
        write_calls(store, client.take_calls("r1", 1), "calls-echo", "teacher")
        client.close()
    assert key not in text
    # an error body that quotes it: the call's error row is masked
    body = {"error": {"message": f"invalid key {key}"}}
    with FakeLLMServer(lambda request: Reply(status=401, body=body)) as server:
        client = _client(server.base_url, root)
        with pytest.raises(LLMRequestError) as err:
            client.chat_sync([{"role": "user", "content": "hi"}])
        write_calls(store, client.take_calls("r1", 1), "calls-error", "teacher")
        client.close()
    assert key not in str(err.value)
    # a tool result that holds it: the row is written masked
    traj = samples(run_id="r1", round=1)["trajectories"]
    turns = [m.model_copy(update={"content": f"{m.content} token={key}"}) for m in traj.messages]
    store.write([traj.model_copy(update={"messages": turns})], "tool-result")
    # a log line that holds it, through a handler writing under the root
    handler = logging.FileHandler(root / "run.log")
    logging.getLogger().addHandler(handler)
    try:
        logging.getLogger("evosyn.test").warning("the server said: %s", key)
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert _hits(root, key) == []
    assert "***" in (root / "run.log").read_text()
    rows = store.read_records("trajectories", run_id="r1")
    assert all("token=***" in m.content for m in rows[0].messages if m.content)
    errors = [c.error for c in store.read_records("llm_calls", run_id="r1") if c.status == "error"]
    assert errors and "***" in errors[0]


def test_without_a_key_tables_are_written_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(redact, "_secrets", ())
    table = pa.table({"a": ["x sk-nothing"], "b": [["y"]]})
    assert redact.redact_table(table) is table


def test_short_values_are_never_taken_for_keys(monkeypatch):
    monkeypatch.setattr(redact, "_secrets", ())
    redact.register("EMPTY", "", None)
    assert redact.secrets() == () and redact.redact("EMPTY") == "EMPTY"


def test_list_columns_are_masked_too(monkeypatch):
    monkeypatch.setattr(redact, "_secrets", ())
    redact.register(KEY)
    table = pa.table({"tags": [[f"a{KEY}b", "c"], None, ["d"]]}).slice(0, 3)
    assert redact.redact_table(table).column("tags").to_pylist() == [["a***b", "c"], None, ["d"]]
