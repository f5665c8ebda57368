"""Each stage's LLM calls land in its own chunk of ``llm_calls`` (finding 6), against a scripted server.

Two generate chunks run at once on the one shared generator client: the chunk
that finishes first must not take the other's calls, and a rerun of a chunk
(a resume after a crash before its outputs) rewrites only its own calls.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq

import tasks.stages as stages
from agents.designer import ColdStart
from benchmarks.fake_llm_server import FakeLLMServer, Reply
from envs.ontology import load_initial_space
from storage.config import RoleConfig
from storage.store import Store
from benchmarks.llm_script import RoleScript, after, texts

KEY = "sk-test-CHUNKS"


def _blueprint_of(body: dict) -> str:
    prompt = next(t for r, t in texts(body) if r == "user")
    return after(prompt, "BLUEPRINT")["blueprint_id"]


def test_concurrent_chunks_each_write_their_own_calls_and_a_rerun_duplicates_none(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store(tmp_path / "home")
    space = load_initial_space("airline", run_id="chunks")
    embedded = stages.Ctx(store, "chunks", 1, 0)
    blueprints = stages.plan(embedded, space, stages.design(embedded, space, ColdStart(), 6, "evosyn"))
    a, b = blueprints[:1], blueprints[1:3]
    slow = b[1].blueprint_id  # chunk b: one fast reply, then one slow one
    script = RoleScript()

    def respond(request):
        return Reply(body=script(request), delay_s=1.0 if _blueprint_of(request.body) == slow else 0.0)

    with FakeLLMServer(respond) as server:
        llm = {"generator": RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini", base_url=server.base_url,
                                       max_concurrency=4).model_dump()}
        ctx = stages.Ctx(store, "chunks", 1, 0, llm=llm)
        with ThreadPoolExecutor(max_workers=2) as pool:  # as the Prefect round maps chunks
            fb = pool.submit(stages.generate, ctx, space, b)
            time.sleep(0.4)  # b's fast call is done and logged, its slow one in flight
            fa = pool.submit(stages.generate, ctx, space, a)  # a finishes (and flushes) while b still waits
            fa.result(), fb.result()
        sent = server.count

        part = store.partition_dir("llm_calls", "chunks", 1)
        chunk_a = part / f"{stages.chunk_name('gen', a)}-generator.parquet"
        chunk_b = part / f"{stages.chunk_name('gen', b)}-generator.parquet"
        by_key = {}  # request hash -> blueprint, from the cached requests
        for f in (store.root / "llm_cache").rglob("*.json"):
            entry = json.loads(f.read_text())
            by_key[entry["key"]] = _blueprint_of({"messages": entry["request"]["messages"]})

        def owners(path):
            return sorted(by_key[r["request_hash"]] for r in pq.read_table(path).to_pylist())

        assert set(owners(chunk_a)) == {a[0].blueprint_id}  # on the base code, b's fast call was here too
        assert set(owners(chunk_b)) == {bp.blueprint_id for bp in b}
        rows = store.read_records("llm_calls", run_id="chunks")
        assert len(rows) == sent and len({r.call_id for r in rows}) == sent  # none lost, none twice

        # a resume after a crash before b's outputs: b is redone from the cache, its chunk rewritten
        (store.partition_dir("tasks", "chunks", 1) / f"{stages.chunk_name('gen', b)}.parquet").unlink(
            missing_ok=True)
        stages.generate(ctx, space, b)
        assert server.count == sent  # nothing asked again
    again = store.read_records("llm_calls", run_id="chunks")
    assert len(again) == len(rows) and len({(r.request_hash, r.attempt) for r in again}) == len(rows)
    assert set(owners(chunk_a)) == {a[0].blueprint_id}  # untouched by b's rerun
    assert set(owners(chunk_b)) == {bp.blueprint_id for bp in b}
    assert all(r["cache_hit"] for r in pq.read_table(chunk_b).to_pylist())
