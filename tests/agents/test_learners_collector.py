"""The collector pause: off inside, back as it was after, nested and concurrent blocks sharing one pause."""
import gc
import threading

import pytest

from evosyn.agents.learners.collector import collector_paused


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_off_inside_and_on_after_even_when_the_block_raises():
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("inside")
    assert gc.isenabled()


def test_nested_blocks_end_the_pause_with_the_outermost():
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block's end does not turn it back on
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_concurrent_blocks_end_the_pause_with_the_last():
    inside, release = threading.Event(), threading.Event()

    def other():
        with collector_paused():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    with collector_paused():
        t.start()
        assert inside.wait(5)
    assert not gc.isenabled()  # the other thread's block is still open
    release.set()
    t.join(5)
    assert gc.isenabled()
