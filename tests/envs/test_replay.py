"""The gold-replay cache: one replay per (domain, task), bounded (LRU), safe under concurrent verifiers."""
from concurrent.futures import ThreadPoolExecutor

from evosyn.envs import replay
from tests.envs.conftest import with_actions


class Counting:
    """A domain that counts the episodes it starts (one per uncached gold replay)."""

    def __init__(self, domain):
        self.domain, self.name, self.episodes = domain, domain.name, 0

    def episode(self, initial_state=None):
        self.episodes += 1
        return self.domain.episode(initial_state)

    def tool_kind(self, name, requestor="assistant"):
        return self.domain.tool_kind(name, requestor)


def test_gold_replay_is_computed_once_per_task(airline):
    tasks = with_actions(airline)[:3]
    dom, gold = Counting(airline), replay.cached_gold_replay(10)
    first = [gold(dom, t) for t in tasks]
    assert dom.episodes == 3 and [len(c) for _, c in first] == [len(t.gold_actions) for t in tasks]
    assert [gold(dom, t) for t in tasks] == first and dom.episodes == 3
    assert first == [replay.gold_replay(airline, t) for t in tasks]  # the module-wide cache agrees
    assert any(any(changed) for _, changed in first)  # some gold write changed the DB...
    for (digest, changed), t in zip(first, tasks):  # ...and then the final digest differs from the initial one
        assert (digest != airline.episode(t.initial_state).state_digest()) == any(changed)


def test_gold_cache_is_bounded_and_evicts_the_least_recently_used(airline):
    a, b, c = with_actions(airline)[:3]
    dom, gold = Counting(airline), replay.cached_gold_replay(2)
    for t in (a, b, a, c):  # c evicts b: a was used after it
        gold(dom, t)
    assert dom.episodes == 3 and len(gold.cache) == 2
    gold(dom, a)
    assert dom.episodes == 3  # still cached
    gold(dom, b)
    assert dom.episodes == 4  # replayed again
    gold.cache_clear()
    assert len(gold.cache) == 0


def test_gold_cache_under_threads(airline):
    tasks = with_actions(airline)[:4]
    expected = [replay._replay_gold(airline, t) for t in tasks]
    dom, gold = Counting(airline), replay.cached_gold_replay(3)  # smaller than the working set: evictions race
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: gold(dom, tasks[i % 4]), range(64)))
    assert got == [expected[i % 4] for i in range(64)] and len(gold.cache) == 3
