"""Each stage's LLM calls land in its own chunk of ``llm_calls`` (finding 6), against a scripted server.

Two generate chunks run at once on the one shared generator client: the chunk
that finishes first must not take the other's calls, and a rerun of a chunk
(a resume after a crash between its calls and its completion marker) keeps the
calls its first attempt recorded and adds none of the cache's replays of them.
"""
from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

from evosyn.envs.packs import get_domain
from evosyn.agents.designer import ColdStart
from evosyn.agents.llm.cache import ResponseCache
from evosyn.benchmarks.fake_llm_server import FakeLLMServer, Reply
from evosyn.benchmarks.llm_script import RoleScript, after, texts
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.config import RoleConfig
from evosyn.storage.store import Store
from evosyn.tasks import context, stages

KEY = "sk-test-CHUNKS"


def _blueprint_of(body: dict) -> str:
    prompt = next(t for r, t in texts(body) if r == "user")
    return after(prompt, "BLUEPRINT")["blueprint_id"]


class Crash(BaseException):
    """What the ``generate`` kill point does (a SIGKILL), in-process: b's calls and tasks are on disk, no marker."""


def test_concurrent_chunks_each_write_their_own_calls_and_a_resume_loses_and_duplicates_none(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store(tmp_path / "home")
    space = load_initial_space(get_pack("airline"), run_id="chunks")
    embedded = stages.Ctx(store, "chunks", 1, 0, get_domain("airline"))
    blueprints = stages.plan(embedded, space, stages.design(embedded, space, ColdStart(), 6, "evosyn"))
    a, b = blueprints[:1], blueprints[1:3]
    slow = b[1].blueprint_id  # chunk b: one fast reply, then one slow one
    script = RoleScript(get_domain("airline"))
    finished = []

    def kill_point(point, round=None):  # the second chunk to reach it (b, the slow one) dies there
        finished.append(point)
        if point == "generate" and finished.count("generate") == 2:
            raise Crash

    def respond(request):
        return Reply(body=script(request), delay_s=1.0 if _blueprint_of(request.body) == slow else 0.0)

    with FakeLLMServer(respond) as server:
        llm = {"generator": RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini", base_url=server.base_url,
                                       max_concurrency=4)}
        ctx = stages.Ctx(store, "chunks", 1, 0, llm_roles=llm, env=get_domain("airline"))
        with monkeypatch.context() as m, ThreadPoolExecutor(max_workers=2) as pool:  # as the Prefect round maps
            m.setattr(context, "kill_point", kill_point)  # where Ctx.crash_point calls it
            fb = pool.submit(stages.generate, ctx, space, b)
            time.sleep(0.4)  # b's fast call is done and logged, its slow one in flight
            fa = pool.submit(stages.generate, ctx, space, a)  # a finishes (and flushes) while b still waits
            fa.result()
            with pytest.raises(Crash):
                fb.result()
        sent = server.count
        assert store.is_complete("generate", "chunks", 1, stages.chunk_name("gen", a))
        assert not store.is_complete("generate", "chunks", 1, stages.chunk_name("gen", b))

        part = store.partition_dir("llm_calls", "chunks", 1)
        chunk_a = part / f"{stages.chunk_name('gen', a)}-generator.parquet"
        chunk_b = part / f"{stages.chunk_name('gen', b)}-generator.parquet"
        by_key = {}  # request hash -> blueprint, from the cached requests
        for entry in ResponseCache(store.root / "llm_cache").entries():
            by_key[entry["key"]] = _blueprint_of({"messages": entry["request"]["messages"]})

        def owners(path):
            return sorted(by_key[r["request_hash"]] for r in pq.read_table(path).to_pylist())

        assert set(owners(chunk_a)) == {a[0].blueprint_id}  # on the base code, b's fast call was here too
        assert set(owners(chunk_b)) == {bp.blueprint_id for bp in b}
        rows = store.read_records("llm_calls", run_id="chunks")
        assert len(rows) == sent and len({r.call_id for r in rows}) == sent  # none lost, none twice
        paid_b = pq.read_table(chunk_b).to_pylist()
        assert paid_b and not any(r["cache_hit"] for r in paid_b) and sum(r["cost_usd"] for r in paid_b) > 0

        # the resume: b is redone (every reply from the cache), and its first attempt's rows are kept
        assert [t.blueprint_id for t in stages.generate(ctx, space, b)]
        assert server.count == sent  # nothing asked again
        assert store.is_complete("generate", "chunks", 1, stages.chunk_name("gen", b))

        clean = Store(tmp_path / "clean")  # the same chunk, never interrupted, on a store of its own
        stages.generate(stages.Ctx(clean, "chunks", 1, 0, llm_roles=llm, env=get_domain("airline")), space, b)
    again = store.read_records("llm_calls", run_id="chunks")
    assert sorted(r.call_id for r in again) == sorted(r.call_id for r in rows)  # none lost, none added
    assert pq.read_table(chunk_b).to_pylist() == paid_b  # the paid rows, unchanged: no cache-hit replay over them
    assert set(owners(chunk_a)) == {a[0].blueprint_id}  # untouched by b's rerun
    assert set(owners(chunk_b)) == {bp.blueprint_id for bp in b}

    def requests(records):
        return Counter((r.request_hash, r.attempt, r.transport_attempt, r.status, r.cache_hit) for r in records)

    resumed = store.read_chunk("llm_calls", "chunks", 1, f"{stages.chunk_name('gen', b)}-generator")
    uninterrupted = clean.read_chunk("llm_calls", "chunks", 1, f"{stages.chunk_name('gen', b)}-generator")
    assert uninterrupted and requests(resumed) == requests(uninterrupted)


def test_a_url_that_answers_with_no_chat_completion_fails_the_stage_but_a_bad_model_does_not(tmp_path, monkeypatch):
    """Finding 5: an endpoint that is some other web server (200 with an HTML page) is as unusable as a dead one;
    a model whose answers are all invalid is not that: its rejections are recorded, and then the stage stops
    saying the model gave no usable reply (on_invalid: fail, the default) or falls back, warned
    (on_invalid: fallback; tests/tasks/test_on_invalid.py)."""
    from evosyn.agents.roles import RoleInvalid, StageUnavailable

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    space = load_initial_space(get_pack("airline"), run_id="web")
    page = Reply(raw=b"<html><body>Please log in</body></html>", headers={"Content-Type": "text/html"})
    garbage = Reply(body={"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "no JSON here"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}})
    for reply, fails, on_invalid in ((page, True, "fail"), (garbage, False, "fail"), (garbage, False, "fallback")):
        with FakeLLMServer(lambda request, reply=reply: reply) as server:
            llm = {"designer": RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini",
                                          base_url=server.base_url, max_invalid_retries=1, on_invalid=on_invalid)}
            ctx = stages.Ctx(Store(tmp_path / f"h-{fails}-{on_invalid}"), "web", 1, 0, llm_roles=llm, env=get_domain("airline"))
            if fails:
                with pytest.raises(StageUnavailable, match=server.base_url) as err:
                    stages.design(ctx, space, ColdStart(), 6, "evosyn")
                assert not isinstance(err.value, RoleInvalid)  # the server is the problem, not the model
            elif on_invalid == "fail":
                with pytest.raises(RoleInvalid, match="gave no usable reply"):
                    stages.design(ctx, space, ColdStart(), 6, "evosyn")
            else:  # the embedded fallback takes over, warned, and the rejections are on record
                assert stages.design(ctx, space, ColdStart(), 6, "evosyn")
            rows = ctx.store.read_records("llm_calls", run_id="web")
            assert rows and all(r.status in ("invalid", "fallback") for r in rows)
            assert sum(r.status == "fallback" for r in rows) == (on_invalid == "fallback")
