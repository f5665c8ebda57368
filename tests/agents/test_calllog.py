"""A redone stage's calls join what its interrupted attempt recorded (finding 6): none lost, none twice."""
from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from evosyn.agents.llm.calllog import merge_calls, write_calls
from evosyn.storage.records import LLMCall
from evosyn.storage.store import Store

T0 = datetime(2024, 1, 1, tzinfo=UTC)
CHUNK = "gen-abc-generator"


def row(n: int, key: str, *, attempt: int = 0, transport: int = 1, status: str = "ok", hit: bool = False,
        cost: float = 0.01) -> LLMCall:
    return LLMCall(run_id="r", round=1, call_id=f"c{n}", role="generator", provider="openai", model="m",
                   request_hash=key, attempt=attempt, transport_attempt=0 if hit else transport, status=status,
                   cache_hit=hit, cost_usd=0.0 if hit else cost, created_at=T0 + timedelta(seconds=n))


# the first attempt: K1 after one 429, K1's re-ask rejected then answered, K2 asked twice (the second a cache hit)
FIRST = [row(1, "K1", status="retry", cost=0.0), row(2, "K1", transport=2), row(3, "K2"), row(4, "K2", hit=True),
         row(5, "K3", status="invalid"), row(6, "K4", attempt=1)]


def redo(start: int) -> list[LLMCall]:
    """The same stage again: every reply the first attempt got comes back from the cache."""
    return [row(start, "K1", hit=True), row(start + 1, "K2", hit=True), row(start + 2, "K2", hit=True),
            row(start + 3, "K3", status="invalid", hit=True), row(start + 4, "K4", attempt=1, hit=True)]


def test_the_cache_replays_of_recorded_calls_are_dropped_and_nothing_else():
    assert merge_calls(FIRST, redo(10)) == []
    fresh = row(20, "K5")  # a request the first attempt never made, paid now
    again = row(21, "K1", transport=1)  # its cache entry lost: asked and paid again, a real call
    extra = row(22, "K2", hit=True)  # a third replay of K2: the first attempt had two
    other_ask = row(23, "K4", attempt=2, hit=True)  # same request, another ask
    assert merge_calls(FIRST, [*redo(10), fresh, again, extra, other_ask]) == \
        sorted([fresh, again, extra, other_ask], key=lambda c: (c.request_hash, c.attempt, c.cache_hit))
    assert merge_calls([], redo(10)) == sorted(redo(10), key=lambda c: (c.request_hash, c.attempt, c.cache_hit))


def test_write_calls_keeps_the_first_attempt_through_any_number_of_redos(tmp_path):
    store = Store(tmp_path / "home")
    assert write_calls(store, FIRST, CHUNK) == len(FIRST)
    written = store.read_chunk("llm_calls", "r", 1, CHUNK)
    assert Counter(c.call_id for c in written) == Counter(c.call_id for c in FIRST)
    assert sum(c.cost_usd for c in written) == sum(c.cost_usd for c in FIRST)  # on the base code: 0 after a redo

    for start in (10, 30):  # crashed again after the flush: still the first attempt's rows
        assert write_calls(store, redo(start), CHUNK) == 0
        assert store.read_chunk("llm_calls", "r", 1, CHUNK) == written

    fresh = row(40, "K5")
    assert write_calls(store, [*redo(50), fresh], CHUNK) == 1
    merged = store.read_chunk("llm_calls", "r", 1, CHUNK)
    assert sorted(c.call_id for c in merged) == sorted([*(c.call_id for c in FIRST), "c40"])
    # a stable order: a rewrite of the same rows, in whatever order they came, is the same file content
    store.write(list(reversed(merged)), "scratch")
    assert write_calls(store, [row(60, "K6")], "scratch") == 1
    assert [c.call_id for c in store.read_chunk("llm_calls", "r", 1, "scratch")] == \
        [c.call_id for c in sorted([*merged, row(60, "K6")], key=lambda c: (c.request_hash, c.attempt, c.cache_hit,
                                                                             c.transport_attempt, c.status,
                                                                             c.created_at))]
