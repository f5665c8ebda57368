"""`LLMClient`: one async chat interface over OpenAI, Anthropic and OpenAI-compatible servers.

A call goes: cache lookup -> (per-model concurrency slot, rpm and tpm buckets,
request, retried on transient errors with backoff) -> cache write ->
interpretation (strict JSON, schema, truncation; ``evosyn.agents.llm.replies``) -> an
`LLMCall` row. Every HTTP attempt is a row: a transient failure that is retried
(status ``retry``), the last failure (``error``), or the reply (``ok`` /
``invalid``), each with its ``transport_attempt``; a cache hit is a row with
no request. A 429 is retried after the server's ``retry-after``; one that
announces the server's request limit also paces every later call of the model
to it (``ModelLimits.learn_rpm``).

Only a reply of the normalized shape is cached, and interpretation comes after
the cache on purpose: a cached unusable reply is interpreted again on a rerun,
so the rerun replays the same recorded rejection (an ``invalid`` row, a cache
hit) and the role's re-ask (the next ``attempt``, its own cache key) gets the
same fresh answer as before: a resumed run makes the decisions of the first one.
Interpretation raises nothing but ``LLMOutputError``, so no reply can crash a
rerun, and a rejected reply is never replayed as if it were valid.

A caller that wants its own calls apart (one stage's chunk, while other chunks
share the client) passes a ``CallLog``, or uses ``client.bound()``.

With ``tool_calls="prompt"`` (a role's ``tool_calls: prompt``) a call that offers
tools sends them in the system prompt instead and reads the call from the
reply text (``evosyn.agents.llm.prompt_tools``); a bad call is an ``invalid`` row.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evosyn.agents.llm.cache import ResponseCache, key_of, request_blob, request_key
from evosyn.agents.llm.calllog import BoundClient, CallLog, CallLogView
from evosyn.agents.llm.limits import limits_for
from evosyn.agents.llm.loops import hop, new_loop, shut_down
from evosyn.agents.llm.pricing import cost_usd
from evosyn.agents.llm.prompt_tools import MODES, parse_tool_reply, prompt_messages
from evosyn.agents.llm.providers import json_schema
from evosyn.agents.llm.replies import (
    interpret,
    normalize_reply,
    one_line,
    parse_structured,
    read_reply,
)
from evosyn.agents.llm.retries import announced_rpm, is_transient, retry_after_s
from evosyn.agents.llm.types import ChatResult, LLMOutputError, LLMUnavailable, Usage
from evosyn.storage.redact import redact_value

logger = logging.getLogger("evosyn.llm")


class LLMRequestError(LLMUnavailable):
    """The provider refused the request itself (400 / 401 / 403 / 404 …): retrying cannot help."""


@functools.lru_cache(maxsize=256)
def schema_digest(schema: type[BaseModel]) -> str:
    """The cache key's stand-in for a schema: the hash of its JSON schema (the same schema, the same key)."""
    return request_key(json_schema(schema))


# ---------------------------------------------------------------- the client
class _Try:
    """The transport attempt in progress (number and start), read by the row of a failed call."""

    def __init__(self) -> None:
        self.number, self.started = 0, time.perf_counter()


class LLMClient(CallLogView):
    """One role's model. Thread-safe; its limits are shared with every client of the same model.

    Every call runs on the client's own I/O loop (a daemon thread started on
    first use), whichever event loop or thread asks: the SDK's connection pool
    belongs to one loop, and this way async callers, ``chat_sync`` callers and
    worker threads all share that pool and the same limits.
    """

    def __init__(self, role: str, provider, *, model: str, base_url: str | None = None, temperature: float | None,
                 max_tokens: int | None, max_concurrency: int = 8, rpm: int | None = None, tpm: int | None = None,
                 max_retries: int = 6, price: tuple[float, float] | None = None, cache_dir: Path | None = None,
                 secrets: tuple[str, ...] = (), backoff_initial_s: float = 1.0, backoff_max_s: float = 30.0,
                 run_id: str = "pending", round: int = 0, tool_calls: str = "native", batch: bool = False,
                 batch_window_s: float = 2.0, batch_poll_s: float = 30.0):
        if tool_calls not in MODES:
            raise ValueError(f"tool_calls: {tool_calls!r} is not one of {', '.join(MODES)}")
        self.role, self.provider, self.model, self.base_url = role, provider.name, model, base_url
        self.tool_calls = tool_calls  # "prompt": tools in the system prompt, the call as JSON in the text
        self.temperature, self.max_tokens, self.max_retries, self.price = temperature, max_tokens, max_retries, price
        self.run_id, self.round = run_id, round
        self.limits = limits_for((provider.name, base_url or "", model), max_concurrency, rpm, tpm)
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self.http_requests = 0  # requests actually sent (retries included)
        self._provider = provider
        self._secrets = tuple(s for s in secrets if s)
        self.log = CallLog()  # the calls of callers that pass no log of their own
        self.batcher = None  # batch: true: requests go through the provider's batch API (agents.llm.batch)
        if batch:
            if self.cache is None:
                raise ValueError("batch: needs a cache_dir (the journal of submitted batches lives there)")
            from evosyn.agents.llm.batch import Batcher, BatchJournal
            from evosyn.agents.llm.pricing import batch_price_of

            self.batcher = Batcher(provider, BatchJournal(Path(cache_dir) / "batches.jsonl"),
                                   window_s=batch_window_s, poll_s=batch_poll_s)
            self.price = batch_price_of(provider.name, model, price)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._finalizer: weakref.finalize | None = None

    def __repr__(self) -> str:  # never the key
        return f"LLMClient(role={self.role!r}, provider={self.provider!r}, model={self.model!r})"

    @property
    def endpoint(self) -> str:
        """Where the requests go, for one-line errors (the provider's default URL when none is set)."""
        return self.base_url or f"the {self.provider} API"

    def bound(self, log: CallLog | None = None) -> BoundClient:
        """This client with its calls going to ``log`` (a new one by default)."""
        return BoundClient(self, log or CallLog())

    # ------------------------------------------------------------ the call
    async def chat(self, messages: list[dict], *, schema: type[BaseModel] | None = None,
                   tools: list[dict] | None = None, role: str = "", temperature: float | None = None,
                   max_tokens: int | None = None, attempt: int = 0, log: CallLog | None = None) -> ChatResult:
        """One chat call. Runs on the client's I/O loop whatever loop awaits it (see the class doc)."""
        kw = dict(schema=schema, tools=tools, role=role, temperature=temperature, max_tokens=max_tokens,
                  attempt=attempt, log=log)
        loop = self._io_loop()
        caller = asyncio.get_running_loop()
        if caller is loop:
            return await self._chat(messages, **kw)
        return await hop(self._chat(messages, **kw), loop, caller)

    def chat_sync(self, messages: list[dict], **kw: Any) -> ChatResult:
        """Blocking ``chat`` for sync code and worker threads (any number of threads at once).

        Inside a coroutine use ``await client.chat(...)`` instead: calling this
        there blocks the caller's loop until the reply comes.
        """
        loop = self._io_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError("chat_sync was called on the client's own I/O loop: await chat(...) there")
        return asyncio.run_coroutine_threadsafe(self._chat(messages, **kw), loop).result()

    def _io_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = new_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                                name=f"evosyn-llm-{self.role or 'client'}")
                self._thread.start()
                # closes the SDK's connections when the client is collected or the process exits
                self._finalizer = weakref.finalize(self, shut_down, self._loop, self._thread, self._provider)
            return self._loop

    def close(self) -> None:
        """Close the connections and stop the I/O loop; a later call starts them again."""
        with self._lock:
            finalizer, self._loop, self._thread, self._finalizer = self._finalizer, None, None, None
        if finalizer is not None:
            finalizer()

    def _cached(self, key: str) -> dict[str, Any] | None:
        reply = self.cache.get(key) if self.cache else None
        if reply is None:
            return None
        try:
            return redact_value(normalize_reply(reply))  # an entry an older version cached unmasked
        except LLMOutputError:  # an entry of another shape (an older version, a damaged file): ask again
            logger.info("%s %s: cache entry %s is unreadable, asking again", self.provider, self.model, key[:12])
            return None

    async def _chat(self, messages: list[dict], *, schema: type[BaseModel] | None = None,
                    tools: list[dict] | None = None, role: str = "", temperature: float | None = None,
                    max_tokens: int | None = None, attempt: int = 0, log: CallLog | None = None) -> ChatResult:
        prompted = self.tool_calls == "prompt" and bool(tools)
        reply, cache_hit, latency, usage, record, number = await self._fetch(
            messages, schema=schema, tools=tools, role=role, temperature=temperature, max_tokens=max_tokens,
            attempt=attempt, log=log, prompted=prompted)
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        try:
            if prompted:  # the call is in the text: read it as strictly as a native one (agents.llm.prompt_tools)
                text, parsed, calls, finish = interpret(reply, None, max_tokens)
                text, calls = parse_tool_reply(text, tools)
                if schema is not None and not calls:
                    parsed = parse_structured(text, schema)
            else:
                text, parsed, calls, finish = interpret(reply, schema, max_tokens)
        except LLMOutputError as exc:
            record(latency, usage, cache_hit, "invalid", str(exc), number)
            raise
        call_id = record(latency, usage, cache_hit, "ok", "", number)
        return ChatResult(text=text, parsed=parsed, tool_calls=calls, usage=usage, cache_hit=cache_hit,
                          finish_reason=finish, call_id=call_id)

    def reply_sync(self, messages: list[dict], *, tools: list[dict] | None = None, temperature: float | None = None,
                   max_tokens: int | None = None, extra: dict[str, Any] | None = None, role: str = "",
                   log: CallLog | None = None) -> dict[str, Any]:
        """The model's reply as the server sent it, normalized (``replies.normalize_reply``), not interpreted.

        For a caller that scores what the model said instead of re-asking (a served task agent: a
        tool call with malformed arguments or a truncated turn is part of its trajectory, judged by
        the verifier). Cached, rate-limited, retried and recorded like ``chat``; ``extra`` adds fields
        to the request body (``seed``, ``parallel_tool_calls``) and to its cache key.
        """
        loop = self._io_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError("reply_sync was called on the client's own I/O loop")
        return asyncio.run_coroutine_threadsafe(self._reply(messages, tools=tools, temperature=temperature,
                                                            max_tokens=max_tokens, extra=extra, role=role,
                                                            log=log), loop).result()

    async def _reply(self, messages: list[dict], **kw: Any) -> dict[str, Any]:
        reply, cache_hit, latency, usage, record, number = await self._fetch(messages, **kw)
        record(latency, usage, cache_hit, "ok", "", number)
        return reply

    async def _fetch(self, messages: list[dict], *, schema: type[BaseModel] | None = None,
                     tools: list[dict] | None = None, role: str = "", temperature: float | None = None,
                     max_tokens: int | None = None, attempt: int = 0, log: CallLog | None = None,
                     prompted: bool = False, extra: dict[str, Any] | None = None):
        """(normalized reply, cache hit, latency, usage, the row recorder, transport attempt) of one request."""
        temperature = self.temperature if temperature is None else temperature
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        request = {"provider": self.provider, "base_url": self.base_url or "", "model": self.model,
                   "messages": messages, "schema": schema_digest(schema) if schema else None,
                   "schema_name": schema.__name__ if schema else None, "tools": tools or None,
                   "temperature": temperature, "max_tokens": max_tokens, "attempt": attempt}
        if prompted:  # only then: the keys of native calls stay those of earlier caches
            request["tool_calls"] = "prompt"
        mode = getattr(self._provider, "structured_output", "response_format")
        if schema is not None and mode != "response_format":  # likewise: another way to send it, another reply
            request["structured_output"] = mode
        bounds = getattr(self._provider, "bounds", (None, None))
        if schema is not None and bounds != (None, None):  # and a narrower schema
            request["schema_bounds"] = list(bounds)
        if extra:  # likewise
            request["extra"] = extra
        blob = request_blob(request)
        key = key_of(blob)
        record = functools.partial(self._record, log or self.log, role, key, attempt)
        t0 = time.perf_counter()
        reply = self._cached(key)
        cache_hit, current = reply is not None, _Try()
        if reply is None:
            sent = prompt_messages(messages, tools) if prompted else messages
            kwargs = self._provider.build(self.model, sent, schema, None if prompted else tools, temperature,
                                          max_tokens)
            kwargs.update(extra or {})
            try:
                if self.batcher is not None:
                    reply = await self._send_batched(key, kwargs, record, current)
                else:
                    reply = await self._send(kwargs, messages, max_tokens, record, current)
                # a server may quote the key back (an echoed Authorization header): masked before it is
                # cached, parsed or recorded (storage/redact.py)
                reply = redact_value(reply)
            except LLMUnavailable as exc:
                record(time.perf_counter() - current.started, None, False, "error", str(exc), current.number)
                raise
            except LLMOutputError as exc:  # no reply of the normalized shape: never cached
                record(time.perf_counter() - current.started, None, False, "invalid", str(exc), current.number)
                raise
            if self.cache:  # on the loop: unsynced, a write is a few syscalls, less than a hop to a thread
                try:
                    self.cache.put(key, blob, reply)
                except OSError as exc:  # the cache only saves a rerun: a paid reply is used (and recorded) anyway
                    logger.warning("%s %s: reply not cached (%s: %s)", self.provider, self.model, type(exc).__name__,
                                   one_line(str(exc), 200))
        latency = time.perf_counter() - (t0 if cache_hit else current.started)
        cost = 0.0 if cache_hit else cost_usd(self.price, reply["input_tokens"], reply["output_tokens"])
        usage = Usage(input_tokens=reply["input_tokens"], output_tokens=reply["output_tokens"], latency_s=latency,
                      cost_usd=cost)
        return reply, cache_hit, latency, usage, record, current.number

    # ------------------------------------------------------------ transport
    async def _send(self, kwargs: dict[str, Any], messages: list[dict], max_tokens: int | None, record,
                    current: _Try) -> dict[str, Any]:
        # a rough token estimate reserves tpm up front; the real count corrects it afterwards
        estimate = len(json.dumps(messages, default=str)) // 4 + (max_tokens or 0) if self.limits.tpm else 0
        errors = self._provider.errors
        attempts = self.max_retries + 1
        for number in range(1, attempts + 1):
            current.number, current.started = number, time.perf_counter()
            try:
                return await self._send_once(kwargs, estimate)
            except Exception as exc:
                what = self._scrub(one_line(f"{type(exc).__name__}: {exc}", 300))
                if not is_transient(exc, errors):
                    if isinstance(exc, errors[2]):
                        raise LLMRequestError(f"{self.provider} {self.model} refused the request: {what}") from None
                    raise
                rpm = announced_rpm(exc)
                if rpm is not None and self.limits.learn_rpm(rpm):
                    # from now on every call of this model waits its turn here instead of meeting 429s,
                    # whose retries would count against each call's bound and could fail it
                    logger.info("%s %s: the server limits requests to %d a minute; pacing to that", self.provider,
                                self.model, rpm)
                if number == attempts:
                    raise LLMUnavailable(f"{self.provider} {self.model} unavailable after {number} attempts: "
                                         f"{what}") from None
                sleep = self._wait_s(exc, number)
                # the failed attempt is a row of its own: its time counts, and a 429 may be billed
                record(time.perf_counter() - current.started, None, False, "retry", what, number)
                logger.info("%s %s: transient error, retry %d of %d in %.2fs: %s", self.provider, self.model,
                            number, self.max_retries, sleep, what[:200])
            await asyncio.sleep(sleep)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _send_batched(self, key: str, kwargs: dict[str, Any], record, current: _Try) -> dict[str, Any]:
        """The reply through the provider's batch API (``evosyn.agents.llm.batch``): a request the batch left
        unanswered (expired, cancelled, a 429 or 5xx inside it) goes into a later batch, up to the retry
        bound, each try a row; a request the API refused is not retried."""
        from evosyn.agents.llm.batch import BatchFailed

        attempts = self.max_retries + 1
        for number in range(1, attempts + 1):
            current.number, current.started = number, time.perf_counter()
            try:
                body = await self.batcher.fetch(key, kwargs)
            except BatchFailed as exc:
                what = self._scrub(one_line(str(exc), 300))
                if not exc.transient:
                    raise LLMRequestError(f"{self.provider} {self.model} batch: {what}") from None
                if number == attempts:
                    raise LLMUnavailable(f"{self.provider} {self.model} unavailable after {number} batches: "
                                         f"{what}") from None
                record(time.perf_counter() - current.started, None, False, "retry", what, number)
                continue  # no backoff of its own: the next batch's window and polls are the wait
            return read_reply(self._provider.parse, body, kwargs)  # LLMOutputError whatever the body holds
        raise AssertionError("unreachable")

    def _wait_s(self, exc: BaseException, number: int) -> float:
        """Seconds before attempt ``number + 1``: the server's retry-after (bounded, with 0-10% jitter), else
        exponential backoff with jitter (``initial * 2**(n-1) + U(0, initial)``, at most ``backoff_max_s``)."""
        server = retry_after_s(exc)
        if server is not None:
            return min(server, max(self.backoff_max_s, 60.0)) * random.uniform(1.0, 1.1)
        initial = self.backoff_initial_s
        return max(0.0, min(initial * 2.0 ** min(number - 1, 60) + random.uniform(0, initial), self.backoff_max_s))

    async def _send_once(self, kwargs: dict[str, Any], estimate: int) -> dict[str, Any]:
        limits = self.limits
        async with limits.slots:
            if limits.rpm:
                await limits.rpm.take(1)
            if limits.tpm:
                await limits.tpm.take(estimate)
            with self._lock:
                self.http_requests += 1
            try:
                body = await self._provider.send(kwargs)
            except BaseException as exc:
                if limits.tpm:  # a failed request used (about) nothing
                    limits.tpm.adjust(estimate)
                if isinstance(exc, Exception) and not isinstance(exc, self._provider.errors):
                    # the SDK choked on the body (nested too deep to decode, ...): an unusable reply, not a crash
                    raise LLMOutputError(f"the server's reply could not be read ({type(exc).__name__}: "
                                         f"{one_line(str(exc), 200)})") from None
                raise
            reply = read_reply(self._provider.parse, body, kwargs)  # LLMOutputError whatever the body holds
            if limits.tpm:
                limits.tpm.adjust(estimate - reply["input_tokens"] - reply["output_tokens"])
            return reply
