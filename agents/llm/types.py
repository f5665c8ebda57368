"""What an LLM call returns, and the two ways it can fail."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0


class ToolCallOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatResult(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    text: str = ""
    parsed: Any | None = None
    tool_calls: list[ToolCallOut] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cache_hit: bool = False
    finish_reason: str = ""
    call_id: str = ""  # the ``LLMCall`` row of this reply (``CallLog.reject`` marks it refused)


class ClosedSchema(BaseModel):
    """A reply schema whose JSON schema is already the form to send: every object closed, its own ``required``
    lists. The providers send it as it is (``providers.strict_json_schema``), where a plain model goes through
    the SDK's strict form, which requires every property: an optional one that has no default (a tool's
    optional argument, an id an intent may leave out) would then have to be written. Subclassed by a role
    that closes its schema itself (``evosyn.agents.generator_schema.closed_output``)."""


class LLMOutputError(ValueError):
    """The model answered, but the answer is unusable (malformed JSON, schema-invalid, truncated).

    Not retried by the transport: the role decides whether to re-ask with the
    error shown. ``raw`` keeps the text the model produced.
    """

    def __init__(self, message: str, raw: str = "", finish_reason: str = ""):
        super().__init__(" ".join(message.split()))  # one line
        self.raw = raw
        self.finish_reason = finish_reason


class LLMUnavailable(RuntimeError):
    """Transient failures (429 / 5xx / timeout / connection) that outlasted the retry bound."""
