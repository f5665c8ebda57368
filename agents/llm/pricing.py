"""List prices in USD per million tokens (input, output), by provider.

Prices are the providers' published list prices when this table was written;
a role may set ``input_cost_per_mtok`` / ``output_cost_per_mtok`` to override
them or to use a model that is not listed. Models behind an
``openai_compatible`` server (vLLM, llamafactory-cli api) are self-hosted and
cost 0 unless the role sets prices.
"""
from __future__ import annotations

import re

PRICES: dict[str, dict[str, tuple[float, float]]] = {
    "openai": {
        "gpt-4o": (2.50, 10.00),
        "gpt-4o-mini": (0.15, 0.60),
        "gpt-4.1": (2.00, 8.00),
        "gpt-4.1-mini": (0.40, 1.60),
        "gpt-4.1-nano": (0.10, 0.40),
        "gpt-5": (1.25, 10.00),
        "gpt-5-mini": (0.25, 2.00),
        "gpt-5-nano": (0.05, 0.40),
        "o3": (2.00, 8.00),
        "o3-mini": (1.10, 4.40),
        "o4-mini": (1.10, 4.40),
    },
    "anthropic": {
        "claude-opus-4-5": (5.00, 25.00),
        "claude-opus-4-1": (15.00, 75.00),
        "claude-opus-4-0": (15.00, 75.00),
        "claude-sonnet-4-5": (3.00, 15.00),
        "claude-sonnet-4-0": (3.00, 15.00),
        "claude-haiku-4-5": (1.00, 5.00),
        "claude-3-5-haiku": (0.80, 4.00),
    },
}

# a dated snapshot or alias of a listed model: gpt-4o-2024-08-06, claude-sonnet-4-5-20250929, …-latest
_SNAPSHOT = r"(-\d{4}-?\d{2}-?\d{2}|-latest)?"


def price_of(provider: str, model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, or None when the model is not listed."""
    table = PRICES.get(provider, {})
    if model in table:
        return table[model]
    for name in sorted(table, key=len, reverse=True):
        if re.fullmatch(re.escape(name) + _SNAPSHOT, model):
            return table[name]
    return None


def known_models(provider: str) -> list[str]:
    return sorted(PRICES.get(provider, {}))


def cost_usd(price: tuple[float, float] | None, input_tokens: int, output_tokens: int) -> float:
    if price is None:
        return 0.0
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
