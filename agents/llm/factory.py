"""Role config -> client, and the one-line config check that runs before any work."""
from __future__ import annotations

import os
from pathlib import Path

from evosyn.agents.llm.client import LLMClient
from evosyn.agents.llm.pricing import known_models, price_of, similar_models
from evosyn.config import ConfigError, RoleConfig, load_dotenv_secrets
from evosyn.storage.redact import register as register_secret

PROVIDERS = ("openai", "anthropic", "openai_compatible")
BATCH_ROLES = ("designer", "planner", "generator", "reflector", "repair")  # no conversation: no one waits turn by turn
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
EXAMPLE_MODEL = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "openai_compatible": "Qwen/Qwen3-8B"}


def _key_env(cfg: RoleConfig) -> str | None:
    return cfg.api_key_env or DEFAULT_KEY_ENV.get(cfg.provider or "")


def role_price(cfg: RoleConfig) -> tuple[float, float] | None:
    if cfg.input_cost_per_mtok is not None or cfg.output_cost_per_mtok is not None:
        return (cfg.input_cost_per_mtok or 0.0, cfg.output_cost_per_mtok or 0.0)
    return price_of(cfg.provider or "", cfg.model or "")


def check_role_config(role: str, cfg: RoleConfig) -> None:
    """Raise ``ConfigError`` (one line: the field and the fix) when an LLM role cannot run."""
    if cfg.backend != "llm":
        return
    where = f"roles.{role}"
    if cfg.provider not in PROVIDERS:
        raise ConfigError(f"{where}.provider: {'missing' if cfg.provider is None else repr(cfg.provider)} "
                          f"(set one of {', '.join(PROVIDERS)})")
    if not cfg.model:
        raise ConfigError(f"{where}.model: missing (set the model name, e.g. {EXAMPLE_MODEL[cfg.provider]})")
    if cfg.provider == "openai_compatible" and not cfg.base_url:
        raise ConfigError(f"{where}.base_url: missing (set the server's URL, e.g. http://127.0.0.1:8000/v1)")
    if cfg.provider != "openai_compatible" and role_price(cfg) is None:
        close = similar_models(cfg.provider, cfg.model)
        raise ConfigError(f"{where}.model: {cfg.provider} model {cfg.model!r} has no price in litellm's cost map "
                          f"({'closest: ' + ', '.join(close) + '; ' if close else ''}"
                          f"{len(known_models(cfg.provider))} {cfg.provider} models listed), so its cost is unknown: "
                          f"use a listed model, or set {where}.input_cost_per_mtok and output_cost_per_mtok "
                          "to use it anyway")
    if cfg.structured_output not in ("response_format", "none") and cfg.provider != "openai_compatible":
        raise ConfigError(f"{where}.structured_output: {cfg.structured_output} is a field of vLLM's server "
                          "(use it with provider openai_compatible, or leave the default response_format)")
    bounded = cfg.schema_max_string is not None or cfg.schema_max_items is not None
    if bounded and cfg.provider != "openai_compatible":
        raise ConfigError(f"{where}.schema_max_string / schema_max_items: bounds for a local server's constrained "
                          "decoding (use them with provider openai_compatible)")
    if cfg.structured_output != "response_format" and cfg.provider == "anthropic":
        raise ConfigError(f"{where}.structured_output: anthropic takes the schema as a forced tool "
                          "(leave the default response_format)")
    if cfg.batch and role not in BATCH_ROLES:
        raise ConfigError(f"{where}.batch: {role} talks turn by turn, which a batch cannot (batch is for "
                          f"{', '.join(BATCH_ROLES)})")
    if cfg.batch and cfg.provider not in ("openai", "anthropic"):
        raise ConfigError(f"{where}.batch: {cfg.provider} has no batch API (batch is for provider openai or "
                          "anthropic)")
    env = _key_env(cfg)
    if env:
        load_dotenv_secrets()
        if not os.environ.get(env):
            raise ConfigError(f"{where}.api_key_env: environment variable {env} is not set "
                              "(export it or put it in .env)")


def make_client(role: str, cfg: RoleConfig, *, cache_dir: Path | None = None, cache: bool = True,
                **options) -> LLMClient:
    """The client for one role. The response cache lives in ``cache_dir`` (default ``<store root>/llm_cache``).

    ``options`` go to ``LLMClient`` (e.g. ``backoff_initial_s`` for fast tests, ``run_id``).
    """
    check_role_config(role, cfg)
    if cfg.backend != "llm":
        raise ConfigError(f"roles.{role}.backend: is {cfg.backend!r} (set llm to build an LLM client)")
    env = _key_env(cfg)
    key = os.environ.get(env, "") if env else ""
    register_secret(key)  # from now on no reply, row or log line of this process holds it (storage/redact.py)
    if cfg.provider == "anthropic":
        from evosyn.agents.llm.providers import AnthropicProvider

        provider = AnthropicProvider(cfg.base_url, key, cfg.timeout_s, cfg.max_reply_bytes)
    else:
        from evosyn.agents.llm.providers import OpenAIProvider

        # local servers (vLLM, llamafactory-cli api) accept any key; the SDK insists on one
        provider = OpenAIProvider(cfg.provider, cfg.base_url, key or "EMPTY", cfg.timeout_s, cfg.max_reply_bytes,
                                  cfg.structured_output, (cfg.schema_max_string, cfg.schema_max_items))
    if cache and cache_dir is None:
        from evosyn.storage.store import default_root

        cache_dir = default_root() / "llm_cache"
    if cfg.batch and not cache:  # the journal of submitted batches lives beside the cache
        raise ConfigError(f"roles.{role}.batch: needs the reply cache (a submitted batch is found again there)")
    return LLMClient(role, provider, model=cfg.model, base_url=cfg.base_url, temperature=cfg.temperature,
                     max_tokens=cfg.max_tokens, max_concurrency=cfg.max_concurrency, rpm=cfg.rpm, tpm=cfg.tpm,
                     max_retries=cfg.max_retries, price=role_price(cfg), cache_dir=cache_dir if cache else None,
                     secrets=(key,), tool_calls=cfg.tool_calls, batch=cfg.batch, batch_window_s=cfg.batch_window_s,
                     batch_poll_s=cfg.batch_poll_s, **options)
