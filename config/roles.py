"""One role's model: which provider and model a role runs on, how it is called, and what a call may cost.

Secrets never live in the config itself: a role names the environment variable that holds its API key
(``api_key_env``), read only when the client is built.
"""
from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from evosyn.config.base import Section

# a price per million tokens above this is a typo: the dearest model in litellm's table costs $600
MAX_PRICE_PER_MTOK = 100_000.0

ROLES = ("designer", "planner", "generator", "teacher", "user", "repair", "reflector", "task_agent")


class RoleConfig(Section):
    """How one role runs. Every size has an upper bound, with its reason: a typo (an extra digit or three) is refused
    at config time instead of running for hours or filling memory."""

    backend: Literal["embedded", "llm"] = Field(
        default="embedded",
        description="`llm` to run this role on a model (also implied by `backend: llm` at the top level)")
    provider: Literal["openai", "anthropic", "openai_compatible"] | None = Field(
        default=None,
        description="`openai` (structured outputs), `anthropic` (messages API, JSON through a forced tool), "
                    "`openai_compatible` (vLLM, `llamafactory-cli api`, llama.cpp, by `base_url`)")
    model: str | None = Field(default=None, description="the provider's model name")
    base_url: str | None = Field(
        default=None, description="an http(s) URL with a host, without credentials (`openai_compatible`)")
    api_key_env: str | None = Field(
        default=None,
        description="the environment variable (or `.env` entry) holding the key: the key itself is never in a config")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0,
                               description="sampling temperature (part of the reply cache's key)")
    max_tokens: int = Field(
        default=4096, ge=1, le=1_000_000,
        description="the reply's token limit; at most a million, since no model writes a million-token reply")
    max_concurrency: int = Field(
        default=8, ge=1, le=4096,
        description="requests in flight at once for this model. A batch role gathers a whole stage (1,200-1,500 "
                    "blueprints a round at the paper's scale) into one batch; the bound, because past a few "
                    "thousand open connections a laptop runs out of sockets")
    rpm: int | None = Field(
        default=None, ge=1, le=1_000_000,
        description="requests per minute this role may send (no provider's tier announces more than a million)")
    tpm: int | None = Field(
        default=None, ge=1, le=1_000_000_000,
        description="tokens per minute this role may send (no provider's tier announces more than a billion)")
    max_invalid_retries: int = Field(
        default=2, ge=0, le=10,
        description="times an invalid reply is asked again, with the problem shown to the model, before it is "
                    "recorded as a rejection")
    timeout_s: float = Field(
        default=120.0, gt=0, le=3600,
        description="seconds one request may take (transport); at most an hour: no single reply takes longer")
    max_retries: int = Field(
        default=6, ge=0, le=20,
        description="retries of a request after a 429, a 5xx, a timeout or a connection error (transport)")
    max_reply_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, le=1024 ** 3,
        description="bytes of one reply, refused while it is read (agents/llm/transport.py): 8 MiB is hundreds of "
                    "times a long completion; at most 1 GiB, so a typo cannot let a hostile server fill memory")
    on_invalid: Literal["fail", "fallback"] = Field(
        default="fail",
        description="when the role's replies stay invalid (none usable in a stage, or a designer / reflector answer "
                    "rejected after its re-asks): `fail` stops the run with one line (a configured model is what "
                    "the user pays for); `fallback` goes on (the embedded designer / reflector, or the items "
                    "rejected) with a warning in the stage's line, the report and MLflow, and a `fallback` row in "
                    "`llm_calls`")
    input_cost_per_mtok: float | None = Field(
        default=None, ge=0, le=MAX_PRICE_PER_MTOK,
        description="USD per million input tokens, for a model the price table lacks (or to override it); at most "
                    "$100,000, over a hundred times the dearest model listed ($600)")
    output_cost_per_mtok: float | None = Field(
        default=None, ge=0, le=MAX_PRICE_PER_MTOK,
        description="USD per million output tokens, for a model the price table lacks (or to override it); at most "
                    "$100,000, over a hundred times the dearest model listed ($600)")
    tool_calls: Literal["native", "prompt"] = Field(
        default="native",
        description="`native`: the API's tools; `prompt`: tools described in the system prompt and the call read "
                    "as JSON from the reply text, for models whose chat template has no tool calling "
                    "(agents/llm/prompt_tools.py)")
    max_steps: int | None = Field(
        default=None, ge=1, le=200,
        description="teacher only: model calls per rollout before it ends as `max_steps` (unset: the teacher's "
                    "default, 40)")
    structured_output: Literal["response_format", "structured_outputs", "guided_json", "none"] = Field(
        default="response_format",
        description="how a structured role's JSON schema reaches the server, so that decoding is constrained to it "
                    "(agents/llm/providers.py): `response_format` (OpenAI's json_schema; llama.cpp's server turns "
                    "it into a grammar, vLLM into guided decoding), `structured_outputs` (vLLM >= 0.10's own "
                    "field), `guided_json` (vLLM before 0.12), `none` (the schema only checked on our side). "
                    "Anthropic: always its forced tool")
    schema_max_string: int | None = Field(
        default=None, ge=1, le=1_000_000,
        description="`openai_compatible`: a maxLength on every free string of the schema sent (a free value is a "
                    "short scalar), so a grammar-constrained small model cannot fill one until `max_tokens` "
                    "(unset: the role's schema as it is); at most a million, as `max_tokens`")
    schema_max_items: int | None = Field(
        default=None, ge=1, le=1_000_000,
        description="`openai_compatible`: a maxItems on every array of the schema sent (a free list is short), so "
                    "a grammar-constrained small model cannot fill one until `max_tokens` (unset: the role's "
                    "schema as it is); at most a million, as `max_tokens`")
    batch: bool = Field(
        default=False,
        description="the provider's batch API (OpenAI's Batch API, Anthropic's Message Batches: half the price, "
                    "replies within hours) for a non-interactive role (designer, planner, generator, reflector, "
                    "repair): the calls that arrive within `batch_window_s` of each other go as one batch (set "
                    "`max_concurrency` to the stage's size; agents/llm/batch.py)")
    batch_window_s: float = Field(
        default=2.0, ge=0, le=3600,
        description="seconds a batch waits for more calls before it is sent (`batch: true`); at most an hour, since "
                    "the stage waits that long for its first reply")
    batch_poll_s: float = Field(
        default=30.0, gt=0, le=3600,
        description="seconds between polls of a sent batch at first, then more slowly, up to ten minutes (`batch: "
                    "true`); at most an hour: a provider's batch ends within a day")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """An http(s) URL with a host: checked here, so a typo fails at config time, not after a round."""
        if value is None:
            return value
        try:
            parts = urlsplit(value)
            _ = parts.port  # raises on a port that is not a number (or out of range)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # an unparsable host or port
            ok = False
        if not ok:
            raise ValueError("must be an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1")
        if parts.username or parts.password:  # it would be in every error line, cache key and record
            raise ValueError("must not carry credentials (user:key@): name the key's variable in api_key_env")
        return value
