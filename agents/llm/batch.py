"""A role's calls through a provider's batch API (``RoleConfig.batch``): half the price, replies within hours.

The role code does not change: each ``chat`` still asks for one reply. The ``Batcher`` gathers the calls
that arrive within ``window_s`` of each other (a stage maps its items over ``max_concurrency`` threads, so
set that to the stage's size), submits them as one batch, polls it with backoff, downloads the results and
hands each call its reply, which then goes through the same reading, cache and ``llm_calls`` row as an
interactive one (``evosyn.agents.llm.client``).

Never paying twice: before a batch is submitted, the cache key of every request in it is written to the
journal (``<cache>/batches.jsonl``) with the batch id, under a file lock. A call whose key is in a batch
that has not ended polls that batch instead of submitting (a run killed while its batch was pending
resumes by polling the same batch); a key in a batch that ended with its reply downloads the results
again (a kill between the results and the cache); only a key whose batch ended without its reply
(expired, cancelled, a failure inside the batch) is submitted again, as a retry of its call.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

from filelock import FileLock

from evosyn.agents.llm.batch_apis import Outcome, batch_api

logger = logging.getLogger("evosyn.llm")
POLL_GROWTH, POLL_MAX_S = 1.5, 600.0  # polls slow down to one every ten minutes for a batch of hours


class BatchJournal:
    """Which batch each request key went into, and which batches ended (and what they left unanswered).

    An append-only file of JSON lines, read incrementally into an index (a round's stage asks it once per
    call: thousands of keys, a file that grows with every batch).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        # held across a submission, which the I/O loop awaits between two worker threads: not thread-local
        self.lock = FileLock(str(self.path) + ".lock", thread_local=False)
        self._mutex = threading.Lock()
        self._offset = 0
        self._batch_of: dict[str, str] = {}  # key -> the latest batch that holds it
        self._keys: dict[str, list[str]] = {}  # batch -> its keys
        self._unanswered: dict[str, set[str]] = {}  # ended batch -> its keys without a reply

    def _refresh(self) -> None:
        with self._mutex:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    data = f.read()
            except FileNotFoundError:
                return
            done = data.rfind(b"\n") + 1  # complete lines only: a line being written is read next time
            for line in data[:done].splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:  # a line torn by a crash: what it said is asked again
                    continue
                if "batch" in entry:
                    self._keys[entry["batch"]] = list(entry["keys"])
                    for key in entry["keys"]:
                        self._batch_of[key] = entry["batch"]
                elif "ended" in entry:
                    self._unanswered[entry["ended"]] = set(entry.get("unanswered", ()))
            self._offset += done

    def append(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            torn = f.tell() > 0 and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n"
            f.write((b"\n" if torn else b"") + json.dumps(entry).encode() + b"\n")  # never glued to a torn line
            f.flush()
            os.fsync(f.fileno())  # a submitted batch is paid for: its id must outlive a power cut

    def where(self, key: str) -> str | None:
        """The latest batch that holds ``key`` and may still answer it (pending, or ended with its reply);
        None when the key must be submitted."""
        self._refresh()
        batch = self._batch_of.get(key)
        return None if batch is None or key in self._unanswered.get(batch, ()) else batch

    def keys_of(self, batch_id: str) -> list[str]:
        self._refresh()
        return self._keys.get(batch_id, [])


class BatchFailed(Exception):
    """A request of a batch got no reply: ``transient`` when another batch may get one."""

    def __init__(self, message: str, transient: bool):
        super().__init__(message)
        self.transient = transient


class Batcher:
    """One role's batches: gathers calls, submits, polls, and resolves each call with its reply's body.

    Lives on the client's I/O loop (every call runs there), so its state needs no lock; the journal's
    file lock keeps processes apart.
    """

    def __init__(self, provider: Any, journal: BatchJournal, *, window_s: float, poll_s: float,
                 max_poll_errors: int = 6, max_requests: int = 50_000):
        self.api, self.journal = batch_api(provider), journal
        self.window_s, self.poll_s = window_s, poll_s
        self.max_poll_errors, self.max_requests = max_poll_errors, max_requests
        self.submissions = 0  # batches this process submitted
        self._queue: dict[str, dict[str, Any]] = {}  # key -> request body, waiting for the window to close
        self._waiting: dict[str, asyncio.Future] = {}  # key -> its reply (one per key: same request, same reply)
        self._pollers: dict[str, asyncio.Task] = {}  # batch id -> its poller
        self._flusher: asyncio.Task | None = None
        self._last = 0.0

    async def fetch(self, key: str, body: dict[str, Any]) -> Any:
        """The reply body of the request ``body`` (cache key ``key``); ``BatchFailed`` when it got none."""
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = asyncio.get_running_loop().create_future()
            future.add_done_callback(lambda f, k=key: self._waiting.pop(k, None) if self._waiting.get(k) is f
                                     else None)
            found = await asyncio.to_thread(self.journal.where, key)
            if found is not None:  # submitted before (by a run that was killed, or another process): never again
                self._follow(found)
            else:
                self._queue[key] = body
                self._last = time.monotonic()
                if self._flusher is None or self._flusher.done():
                    self._flusher = asyncio.create_task(self._flush())
        return await asyncio.shield(future)

    async def _flush(self) -> None:
        # the window closes when no call has arrived for window_s (or the batch is full)
        while self._queue:
            wait = self._last + self.window_s - time.monotonic()
            if wait > 0 and len(self._queue) < self.max_requests:
                await asyncio.sleep(wait)
                continue
            queued, self._queue = self._queue, {}
            try:
                await self._submit(queued)
            except Exception as exc:  # the submission failed: its calls fail now (a retry asks again)
                self._fail(list(queued), BatchFailed(f"the batch was not submitted: {type(exc).__name__}: {exc}",
                                                     transient=True))

    async def _submit(self, queued: dict[str, dict[str, Any]]) -> None:
        follow: set[str] = set()
        # under the journal's lock from the check to the record: two processes never submit the same key
        await asyncio.to_thread(self.journal.lock.acquire)
        try:
            fresh = []
            for key in queued:
                found = self.journal.where(key)  # under the lock, an index lookup
                if found is None:
                    fresh.append(key)
                else:
                    follow.add(found)
            if fresh:
                batch_id = await self.api.submit([(k, queued[k]) for k in fresh])
                self.submissions += 1
                await asyncio.to_thread(self.journal.append, {"batch": batch_id, "keys": fresh, "at": time.time()})
                logger.info("batch %s submitted: %d requests", batch_id, len(fresh))
                follow.add(batch_id)
        finally:
            await asyncio.to_thread(self.journal.lock.release)
        for batch_id in follow:
            self._follow(batch_id)

    def _follow(self, batch_id: str) -> None:
        task = self._pollers.get(batch_id)
        if task is None or task.done():
            self._pollers[batch_id] = asyncio.create_task(self._poll(batch_id))

    async def _poll(self, batch_id: str) -> None:
        delay, errors = self.poll_s, 0
        while True:
            try:
                ended, info = await self.api.status(batch_id)
                if ended:
                    results = await self.api.results(info)
                    break
                errors = 0
            except Exception as exc:  # polling failed: never resubmit (the batch may still answer); bounded
                errors += 1
                if errors > self.max_poll_errors:
                    keys = await asyncio.to_thread(self.journal.keys_of, batch_id)
                    self._fail(keys, BatchFailed(f"batch {batch_id}: polling failed {errors} times "
                                                 f"({type(exc).__name__}: {exc}); a rerun polls it again",
                                                 transient=False))
                    return
            await asyncio.sleep(delay * random.uniform(1.0, 1.1))
            delay = min(delay * POLL_GROWTH, POLL_MAX_S)
        state = info.get("status") or info.get("processing_status")
        everything = results.get("*")  # the batch failed as a whole
        keys = await asyncio.to_thread(self.journal.keys_of, batch_id)
        outcomes = {key: everything or results.get(key) or Outcome(
            error=f"batch {batch_id} ended ({state}) without a result for this request", transient=True)
            for key in keys}
        # recorded before any call hears of it: a call asked again reads that its key must go in a new batch
        await asyncio.to_thread(self.journal.append, {
            "ended": batch_id, "unanswered": [k for k, o in outcomes.items() if o.body is None], "at": time.time()})
        for key, outcome in outcomes.items():
            if outcome.body is None:
                self._fail([key], BatchFailed(outcome.error, outcome.transient))
            else:
                future = self._waiting.get(key)
                if future is not None and not future.done():
                    future.set_result(outcome.body)

    def _fail(self, keys: list[str], exc: BatchFailed) -> None:
        for key in keys:
            future = self._waiting.get(key)
            if future is not None and not future.done():
                future.set_exception(exc)
