"""Where a client's ``LLMCall`` rows go: a thread-safe log per caller, and one chunk of ``llm_calls`` per flush."""
from __future__ import annotations

import threading
import uuid
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from evosyn.agents.llm.replies import one_line
from evosyn.agents.llm.types import ChatResult, Usage
from evosyn.storage.records import LLMCall
from evosyn.storage.redact import redact

if TYPE_CHECKING:
    from evosyn.agents.llm.client import LLMClient


class CallLog:
    """The ``LLMCall`` rows of one caller (e.g. one stage's chunk), thread-safe.

    Chunks that run at once share a role's client (one pool, one set of limits);
    each passes its own log, so each chunk writes exactly its own calls.
    """

    def __init__(self) -> None:
        self._rows: list[LLMCall] = []
        self._lock = threading.Lock()

    def append(self, row: LLMCall) -> None:
        with self._lock:
            self._rows.append(row)

    def reject(self, call_id: str, reason: str, status: str = "rejected") -> None:
        """The role refused the reply of row ``call_id``: ``rejected`` (of its schema, but its own
        validation refused it) or ``invalid`` (no answer of the schema at all, e.g. a tool call)."""
        with self._lock:
            for i in range(len(self._rows) - 1, -1, -1):  # the newest first: it was just appended
                row = self._rows[i]
                if row.call_id == call_id and row.status == "ok":
                    self._rows[i] = row.model_copy(update={"status": status, "error": reason})
                    return

    @property
    def rows(self) -> list[LLMCall]:
        with self._lock:
            return list(self._rows)

    def take(self) -> list[LLMCall]:
        with self._lock:
            rows, self._rows = self._rows, []
        return rows


def stamp(calls: list[LLMCall], run_id: str | None, round: int | None) -> list[LLMCall]:
    update = {k: v for k, v in (("run_id", run_id), ("round", round)) if v is not None}
    return [c.model_copy(update=update) for c in calls] if update else calls


def _order(c: LLMCall) -> tuple:
    # identical keys differ only by their time (and uuid); both break the tie the same way on every write
    return (c.role, c.request_hash, c.attempt, c.cache_hit, c.transport_attempt, c.status, c.created_at, c.call_id)


def _replies(calls: list[LLMCall]) -> Counter:
    """How many replies (``ok`` / ``invalid`` / ``rejected``, sent or replayed) each (request, ask) got."""
    return Counter((c.request_hash, c.attempt) for c in calls if c.status in ("ok", "invalid", "rejected"))


def merge_calls(recorded: list[LLMCall], new: list[LLMCall]) -> list[LLMCall]:
    """A chunk's rows after a redo: all of ``recorded``, plus what of ``new`` is not a replay of them.

    A stage flushes its calls before its tables and its marker, so a crash in
    between makes the resumed stage ask everything again, and the cache answers
    what the first attempt paid for. Those cache hits are the recorded calls
    seen again, not new ones: dropping them (as many per request and ask as the
    recorded rows hold replies) keeps the paid rows, their retries and errors,
    and adds only what the redo really sent (or replayed beyond the first attempt).
    """
    seen = _replies(recorded)
    fallbacks = {c.request_hash for c in recorded if c.status == "fallback"}
    kept = []
    for c in sorted(new, key=_order):
        if c.status == "fallback" and c.request_hash in fallbacks:  # the redo fell back again: one row says so
            continue
        key = (c.request_hash, c.attempt)
        if c.cache_hit and seen[key] > 0:
            seen[key] -= 1
            continue
        kept.append(c)
    return kept


def write_calls(store, calls: list[LLMCall], chunk: str | None, role: str = "") -> int:
    """Add ``calls`` to their chunk of ``llm_calls``, in a stable order; the number of rows added.

    A chunk written before (an attempt of its stage that crashed before its
    marker) keeps its rows; ``merge_calls`` says which of ``calls`` join them,
    and the merged chunk replaces the old file atomically, so a crash here
    leaves one or the other, never a mix.
    """
    if not calls:
        return 0
    if chunk is None:  # no name to find again: a chunk of its own
        store.write(sorted(calls, key=_order), f"llm-{role or 'calls'}-{calls[0].call_id[:12]}")
        return len(calls)
    groups: dict[tuple[str, int], list[LLMCall]] = defaultdict(list)
    for c in calls:
        groups[(c.run_id, c.round)].append(c)
    merged, added = [], 0
    for (run_id, rnd), group in sorted(groups.items()):
        recorded = store.read_chunk(LLMCall.table, run_id, rnd, chunk)
        new = merge_calls(recorded, group)
        added += len(new)
        merged += sorted([*recorded, *new], key=_order)
    if added:
        store.write(merged, chunk)
    return added


class CallLogView:
    """``calls`` / ``take_calls`` / ``flush`` over ``self.log``, the rows this object's chats recorded."""

    log: CallLog
    role: str
    # what each recorded row names (set by the client)
    run_id: str
    round: int
    provider: str
    model: str
    _secrets: tuple[str, ...] | list[str]

    @property
    def calls(self) -> list[LLMCall]:
        return self.log.rows

    def take_calls(self, run_id: str | None = None, round: int | None = None) -> list[LLMCall]:
        """The calls logged since the last take, stamped with ``run_id`` / ``round``; the log is emptied."""
        return stamp(self.log.take(), run_id, round)

    def flush(self, store, *, run_id: str, round: int, chunk: str | None = None) -> int:
        """Write the pending calls to the ``llm_calls`` table as chunk ``chunk`` (merged with what a redone
        stage's first attempt recorded there: ``write_calls``), or as a new chunk."""
        return write_calls(store, self.take_calls(run_id, round), chunk, self.role)

    # ------------------------------------------------------------ the call log
    def record_fallback(self, reason: str, role: str = "", log: CallLog | None = None) -> None:
        """A ``fallback`` row: the role went on without a usable reply (``on_invalid: fallback``)."""
        self._record(log or self.log, role, f"fallback:{role or self.role}", 0, 0.0, None, False, "fallback",
                     reason)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return redact(text)

    def _record(self, into: CallLog, role: str, key: str, attempt: int, latency: float, usage: Usage | None,
                cache_hit: bool, status: str, error: str, transport_attempt: int = 0) -> str:
        """Append the row; its ``call_id`` (a role that refuses the reply marks it: ``CallLog.reject``)."""
        call_id = uuid.uuid4().hex
        into.append(LLMCall(run_id=self.run_id, round=self.round, call_id=call_id, role=role or self.role,
                            provider=self.provider, model=self.model, request_hash=key,
                            input_tokens=usage.input_tokens if usage else 0,
                            output_tokens=usage.output_tokens if usage else 0, latency_s=latency,
                            cost_usd=usage.cost_usd if usage else 0.0, cache_hit=cache_hit, status=status,
                            error=self._scrub(one_line(error, 500)), attempt=attempt,
                            transport_attempt=0 if cache_hit else transport_attempt))
        return call_id


class BoundClient(CallLogView):
    """A client whose calls go to its own ``CallLog``; everything else (pool, limits, cache) is shared.

    A stage builds one per role, so concurrent chunks each write their own calls
    and none takes another's.
    """

    def __init__(self, client: LLMClient, log: CallLog):
        self.client, self.log = client, log

    def __getattr__(self, name: str) -> Any:  # role, model, limits, endpoint, ...: the shared client's
        if name.startswith("__") or name in ("client", "log"):  # copy / pickle look these up before __init__
            raise AttributeError(name)
        return getattr(self.client, name)

    def __repr__(self) -> str:
        return f"Bound{self.client!r}"

    async def chat(self, messages: list[dict], **kw: Any) -> ChatResult:
        return await self.client.chat(messages, **{**kw, "log": self.log})

    def chat_sync(self, messages: list[dict], **kw: Any) -> ChatResult:
        return self.client.chat_sync(messages, **{**kw, "log": self.log})

    def record_fallback(self, reason: str, role: str = "") -> None:
        self.client.record_fallback(reason, role, self.log)
