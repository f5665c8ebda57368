"""Prices in USD per million tokens (input, output), from litellm's cost map.

The map is the copy bundled with the installed litellm (``LITELLM_LOCAL_MODEL_COST_MAP``,
set before litellm is imported, so nothing is fetched). A model is priced when the map
lists it, or the dated snapshot or ``-latest`` alias of a listed model, under the
same provider. A role may set ``input_cost_per_mtok`` / ``output_cost_per_mtok`` to
override the price or to use a model the map does not list. Models behind an
``openai_compatible`` server (vLLM, llamafactory-cli api) are self-hosted and cost 0
unless the role sets prices.
"""
from __future__ import annotations

import difflib
import os
import re
from functools import lru_cache
from typing import Any

# a dated snapshot or alias of a listed model: gpt-4o-2024-08-06, claude-sonnet-4-5-20250929, …-latest
_SNAPSHOT = re.compile(r"(-\d{4}-?\d{2}-?\d{2}|-latest)$")


@lru_cache(maxsize=1)
def cost_map() -> dict[str, dict[str, Any]]:
    """litellm's model -> cost entry map (imported on first use: litellm takes seconds to import)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled map, never the network
    import litellm

    return litellm.model_cost


def _entry(provider: str, model: str) -> dict[str, Any] | None:
    table = cost_map()
    for name in (model, f"{provider}/{model}"):
        entry = table.get(name)
        if (entry and entry.get("litellm_provider") == provider and entry.get("input_cost_per_token") is not None
                and entry.get("output_cost_per_token") is not None):
            return entry
    return None


def price_of(provider: str, model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, or None when litellm's map does not list the model."""
    if not provider or not model:
        return None
    entry = _entry(provider, model)
    if entry is None and _SNAPSHOT.search(model):
        entry = _entry(provider, _SNAPSHOT.sub("", model))
    if entry is None:
        return None
    return (round(entry["input_cost_per_token"] * 1e6, 6), round(entry["output_cost_per_token"] * 1e6, 6))


def known_models(provider: str) -> list[str]:
    """The chat models litellm prices for ``provider`` (fine-tune templates left out)."""
    return sorted(name for name, e in cost_map().items()
                  if e.get("litellm_provider") == provider and e.get("mode") == "chat" and "/" not in name
                  and not name.startswith("ft:") and e.get("input_cost_per_token") is not None)


def similar_models(provider: str, model: str, n: int = 5) -> list[str]:
    """Priced models whose names are closest to ``model`` (for an error message)."""
    return difflib.get_close_matches(model, known_models(provider), n=n, cutoff=0.5)


def cost_usd(price: tuple[float, float] | None, input_tokens: int, output_tokens: int) -> float:
    if price is None:
        return 0.0
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
