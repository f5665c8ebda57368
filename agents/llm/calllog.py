"""Where a client's ``LLMCall`` rows go: a thread-safe log per caller, and one chunk of ``llm_calls`` per flush."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from agents.llm.types import ChatResult
from storage.records import LLMCall

if TYPE_CHECKING:
    from agents.llm.client import LLMClient


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


def write_calls(store, calls: list[LLMCall], chunk: str | None, role: str = "") -> int:
    """``calls`` as one chunk of ``llm_calls`` (rewriting a chunk replaces it), in a stable order."""
    if calls:
        calls = sorted(calls, key=lambda c: (c.role, c.request_hash, c.attempt, c.cache_hit,
                                             c.transport_attempt, c.status))
        store.write(calls, chunk or f"llm-{role or 'calls'}-{calls[0].call_id[:12]}")
    return len(calls)


class BoundClient:
    """A client whose calls go to its own ``CallLog``; everything else (pool, limits, cache) is shared.

    A stage builds one per role, so concurrent chunks each write their own calls
    and none takes another's.
    """

    def __init__(self, client: LLMClient, log: CallLog):
        self.client, self.log = client, log

    def __getattr__(self, name: str) -> Any:  # role, model, limits, endpoint, ...: the shared client's
        return getattr(self.client, name)

    def __repr__(self) -> str:
        return f"Bound{self.client!r}"

    async def chat(self, messages: list[dict], **kw: Any) -> ChatResult:
        return await self.client.chat(messages, **{**kw, "log": self.log})

    def chat_sync(self, messages: list[dict], **kw: Any) -> ChatResult:
        return self.client.chat_sync(messages, **{**kw, "log": self.log})

    @property
    def calls(self) -> list[LLMCall]:
        return self.log.rows

    def take_calls(self, run_id: str | None = None, round: int | None = None) -> list[LLMCall]:
        return stamp(self.log.take(), run_id, round)

    def flush(self, store, *, run_id: str, round: int, chunk: str | None = None) -> int:
        return write_calls(store, self.take_calls(run_id, round), chunk, self.client.role)
