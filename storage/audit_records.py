"""Records that audit a run rather than carry its data: each model call (``llm_calls``) and each copy check of a
verified task (``dedup``). Re-exported by ``evosyn.storage.records``, which lists every table.
"""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from evosyn.storage.canonical import UTCDatetime
from evosyn.storage.contracts import Record, utcnow


class LLMCall(Record):
    """One HTTP attempt of a model call, or one cache hit (no request).

    ``attempt`` is the role's ask (0, then each re-ask of an unusable reply);
    ``transport_attempt`` the try of that ask's request (1, then each retry of
    a 429 / 5xx / timeout; 0 for a cache hit). ``status``: ``ok``, ``invalid``
    (a reply the role cannot use: not JSON, not of its schema, truncated),
    ``rejected`` (of its schema, but refused by the role's own validation: a
    value outside the space, a broken constraint; the reason in ``error``),
    ``retry`` (a transient failure, retried), ``error`` (the last failure: no
    reply) or ``fallback`` (no request: the role's replies stayed invalid and
    ``on_invalid: fallback`` went on without them; ``error`` says why).
    ``latency_s`` is this attempt's own time, so the rows of a call add up to
    its time on the wire.
    """

    table: ClassVar[str] = "llm_calls"

    call_id: str
    role: str
    provider: str
    model: str
    request_hash: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cache_hit: bool = False
    status: Literal["ok", "invalid", "rejected", "retry", "error", "fallback"] = "ok"
    error: str = ""
    attempt: int = 0
    transport_attempt: int = 0
    created_at: UTCDatetime = Field(default_factory=utcnow)


# ---------------------------------------------------------------- deduplication and decontamination
DedupFlag = Literal["duplicate", "official", "official_test", "test_set"]
DedupTest = Literal["instruction", "actions"]


class DedupCheck(Record):
    """One task checked for near copies (tasks/dedup.py): of an earlier task of its run (``duplicate``), of an
    official task of the domain (``official``; ``official_test`` when that task is in the official test split)
    and, for a synthesized task, of a task of the domain's fixed test sets (``test_set``).

    Two tests find a copy (``*_by``): ``instruction``, the MinHash estimate of the Jaccard similarity of the
    user instructions' word shingles at or above the run's threshold (``*_jaccard``), and ``actions``, the same
    gold actions exactly (``actions_signature``), counted only when they change state (``actions_write``): a
    read-only or empty gold list is shared by every refusal on the same record. ``flags``: the kinds found,
    ``flagged``: any. A test set's own tasks are checked in its run partition, against the official tasks and
    the set's earlier tasks.
    """

    table: ClassVar[str] = "dedup"

    task_id: str
    source: Literal["synthesized", "official", "test_set"] = "synthesized"
    split: str = Field(default="", description="a synthesized task's SFT split (`train` / `diagnostic`); empty for "
                                               "a test set's task")
    actions_signature: str = Field(
        default="", description="sha256 prefix of the gold actions (requestor, name, arguments) in order")
    actions_write: bool = False
    duplicate_of: str = Field(default="", description="the earlier task of the run (or set) it copies")
    duplicate_round: int | None = None
    duplicate_jaccard: float = 0.0
    duplicate_by: list[str] = Field(default_factory=list)
    official_task: str = Field(
        default="", description="the official task it copies (one of the test split's when any matches)")
    official_splits: list[str] = Field(default_factory=list)
    official_jaccard: float = 0.0
    official_by: list[str] = Field(default_factory=list)
    test_set_task: str = Field(default="", description="the test-set task it copies")
    test_set: str = Field(default="", description="that task's test set (its run id)")
    test_set_jaccard: float = 0.0
    test_set_by: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list, description="the kinds found (DedupFlag values)")
    flagged: bool = False
