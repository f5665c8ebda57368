"""Concurrency and rate limits shared by every client of one (provider, base_url, model).

The limits are thread-safe and work across event loops: ``LLMClient.chat_sync``
runs calls on the client's own loop while async callers use theirs, and both
must count against the same per-model bound. (An ``asyncio.Semaphore`` binds
to the first loop that waits on it, so it cannot be shared that way.)
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass


class Slots:
    """An async semaphore that any event loop, on any thread, may wait on."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = deque()

    def tighten(self, limit: int) -> None:
        with self._lock:
            self.limit = min(self.limit, limit)

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.used < self.limit and not self._waiters:
                self.used += 1
                self.peak = max(self.peak, self.used)
                return
            fut = loop.create_future()
            self._waiters.append((loop, fut))
        try:
            await fut
        except BaseException:
            with self._lock:
                try:  # still queued: nothing was handed to us
                    self._waiters.remove((loop, fut))
                    raise
                except ValueError:
                    pass
            self.release()  # a slot was handed over before we could take it: give it back
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters and self.used <= self.limit:
                loop, fut = self._waiters.popleft()
                if loop.is_closed():
                    continue
                # the slot passes straight to the waiter, so `used` stays the same
                if _running_loop() is loop:
                    _wake(fut)  # same loop: no cross-thread wake-up (a syscall) needed
                else:
                    loop.call_soon_threadsafe(_wake, fut)
                return
            self.used -= 1

    async def __aenter__(self) -> "Slots":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():  # a cancelled waiter returns its slot itself (see acquire)
        fut.set_result(None)


class PerMinute:
    """A token bucket refilled continuously at ``per_minute`` units a minute (requests or tokens).

    It holds ``burst`` units at most (a minute's worth unless set) and starts full unless ``empty``.
    """

    def __init__(self, per_minute: int, burst: float | None = None, empty: bool = False):
        self.rate = per_minute / 60.0  # units a second
        self.capacity = float(burst if burst is not None else per_minute)
        self.tokens = 0.0 if empty else self.capacity
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    @property
    def per_minute(self) -> float:
        return self.rate * 60.0

    def tighten(self, per_minute: int) -> None:
        with self._lock:
            self._refill()
            self.capacity = min(self.capacity, float(per_minute))
            self.rate = min(self.rate, per_minute / 60.0)
            self.tokens = min(self.tokens, self.capacity)

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def take(self, amount: float) -> None:
        amount = min(float(amount), self.capacity)  # a request larger than the bucket waits for a full one
        while True:
            with self._lock:
                self._refill()
                if self.tokens >= amount:
                    self.tokens -= amount
                    return
                wait = (amount - self.tokens) / self.rate
            await asyncio.sleep(wait)

    def adjust(self, delta: float) -> None:
        """Correct an estimate after the fact: positive gives units back, negative charges more."""
        with self._lock:
            self._refill()
            self.tokens = min(self.capacity, self.tokens + delta)


@dataclass
class ModelLimits:
    slots: Slots
    rpm: PerMinute | None = None
    tpm: PerMinute | None = None

    def learn_rpm(self, per_minute: int) -> bool:
        """Pace requests at a limit the server announced with a 429; True when that tightened the pace.

        A server's own limit bucket is empty when it refuses, so the learned one starts empty, and it
        holds one second of requests: providers enforce a per-minute limit over shorter periods (OpenAI
        documents 60,000 a minute enforced as 1,000 a second), so a minute's burst would be refused.
        """
        with _REGISTRY_LOCK:
            if self.rpm is not None and self.rpm.per_minute <= per_minute:
                return False
            self.rpm = PerMinute(per_minute, burst=max(1.0, per_minute / 60.0), empty=True)
            return True


_REGISTRY: dict[tuple[str, str, str], ModelLimits] = {}
_REGISTRY_LOCK = threading.Lock()


def limits_for(key: tuple[str, str, str], concurrency: int, rpm: int | None, tpm: int | None) -> ModelLimits:
    """The one set of limits for ``key``; when two roles configure the same model, the tighter bound holds."""
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(key)
        if found is None:
            found = _REGISTRY[key] = ModelLimits(Slots(concurrency), rpm and PerMinute(rpm), tpm and PerMinute(tpm))
            return found
        found.slots.tighten(concurrency)
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value:
                bucket = getattr(found, name)
                if bucket is None:
                    setattr(found, name, PerMinute(value))
                else:
                    bucket.tighten(value)
        return found


def reset_limits() -> None:
    """Forget every shared limit (tests; a new process starts empty anyway)."""
    with _REGISTRY_LOCK:
        _REGISTRY.clear()
