"""The LLM client's own I/O loop: made (uvloop where installed), shut down, and the hop onto it from another loop."""
from __future__ import annotations

import asyncio
import threading


def shut_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread, provider) -> None:
    if loop.is_closed():
        return
    if thread.is_alive():
        try:
            asyncio.run_coroutine_threadsafe(provider.transport.aclose(), loop).result(timeout=5)
        except Exception:  # closing is best effort: the process may be exiting
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
    if not thread.is_alive():
        loop.close()


def new_loop() -> asyncio.AbstractEventLoop:
    # uvloop where installed: its C event loop halves the loop's CPU per call (timers, socket
    # callbacks), which at concurrency 256 is what bounds throughput (`evosyn bench llm`)
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def hop(coro, loop: asyncio.AbstractEventLoop, caller: asyncio.AbstractEventLoop) -> asyncio.Future:
    """Run ``coro`` on ``loop`` (another thread's) and hand its outcome to a future of ``caller``'s loop.

    What ``wrap_future(run_coroutine_threadsafe(...))`` does, without the concurrent future in between (its
    condition variable, lock and chained callbacks): one wake-up of each loop per call. With it (and two
    smaller cuts) ``evosyn bench llm`` at concurrency 256 went from 0.86-0.93 to 0.60-0.68 ms of client CPU a
    call. Cancelling the caller's future cancels the task on ``loop``.
    """
    out = caller.create_future()
    task: list[asyncio.Task] = []

    def settle(t: asyncio.Task) -> None:  # on the caller's loop
        if out.done():
            return
        if t.cancelled():
            out.cancel()
        elif t.exception() is not None:
            out.set_exception(t.exception())
        else:
            out.set_result(t.result())

    def start() -> None:  # on the client's loop
        if out.cancelled():
            coro.close()
            return
        t = loop.create_task(coro)
        task.append(t)
        t.add_done_callback(deliver)

    def deliver(t: asyncio.Task) -> None:  # on the client's loop
        try:
            caller.call_soon_threadsafe(settle, t)
        except RuntimeError:  # the caller's loop closed meanwhile: nobody awaits the outcome
            if not t.cancelled():
                t.exception()  # retrieved: no "exception never retrieved" warning for it

    def forward_cancel(f: asyncio.Future) -> None:  # on the caller's loop
        if f.cancelled():
            try:
                loop.call_soon_threadsafe(lambda: task and task[0].cancel())
            except RuntimeError:  # the client's loop is closed: nothing runs there any more
                pass

    out.add_done_callback(forward_cancel)
    loop.call_soon_threadsafe(start)
    return out
