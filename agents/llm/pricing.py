"""Prices in USD per million tokens (input, output), from litellm's cost map.

The map is the JSON file litellm ships in its wheel and reads itself when
``LITELLM_LOCAL_MODEL_COST_MAP`` is set (``model_prices_and_context_window_backup.json``),
read here as data with ``importlib.resources``: nothing is fetched, and litellm is never
imported (its import takes seconds and leaves about 340,000 more objects in the process).
A model is priced when the map lists it, or the dated snapshot or ``-latest`` alias of a
listed model, under the same provider. A role may set ``input_cost_per_mtok`` /
``output_cost_per_mtok`` to override the price or to use a model the map does not list.
Models behind an ``openai_compatible`` server (vLLM, llamafactory-cli api) are self-hosted
and cost 0 unless the role sets prices.
"""
from __future__ import annotations

import difflib
import importlib.resources
import importlib.util
import json
import re
from functools import lru_cache

# a dated snapshot or alias of a listed model: gpt-4o-2024-08-06, claude-sonnet-4-5-20250929, …-latest
_SNAPSHOT = re.compile(r"(-\d{4}-?\d{2}-?\d{2}|-latest)$")
COST_MAP_FILE = "model_prices_and_context_window_backup.json"

# (litellm_provider, mode, input_cost_per_token, output_cost_per_token, and the two at batch rates), each maybe None
Entry = tuple


def _litellm_files():
    """litellm's package folder as an ``importlib.resources`` traversable, without running its ``__init__``.

    ``importlib.resources.files("litellm")`` would import the package; a module made from its spec
    (not executed) gives the same resource reader.
    """
    spec = importlib.util.find_spec("litellm")
    if spec is None:
        raise RuntimeError("litellm is not installed: its bundled cost map prices LLM calls (pip install litellm)")
    return importlib.resources.files(importlib.util.module_from_spec(spec))


@lru_cache(maxsize=1)
def cost_map() -> dict[str, Entry]:
    """litellm's model -> (provider, mode, input and output cost per token), read once per process."""
    data = json.loads(_litellm_files().joinpath(COST_MAP_FILE).read_text(encoding="utf-8"))
    return {name: (e.get("litellm_provider"), e.get("mode"), e.get("input_cost_per_token"),
                   e.get("output_cost_per_token"), e.get("input_cost_per_token_batches"),
                   e.get("output_cost_per_token_batches")) for name, e in data.items() if isinstance(e, dict)}


def _entry(provider: str, model: str) -> Entry | None:
    table = cost_map()
    for name in (model, f"{provider}/{model}"):
        entry = table.get(name)
        if entry and entry[0] == provider and entry[2] is not None and entry[3] is not None:
            return entry
    return None


def _listed(provider: str, model: str) -> Entry | None:
    if not provider or not model:
        return None
    entry = _entry(provider, model)
    if entry is None and _SNAPSHOT.search(model):
        entry = _entry(provider, _SNAPSHOT.sub("", model))
    return entry


def price_of(provider: str, model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, or None when litellm's map does not list the model."""
    entry = _listed(provider, model)
    if entry is None:
        return None
    return (round(entry[2] * 1e6, 6), round(entry[3] * 1e6, 6))


BATCH_DISCOUNT = 0.5  # OpenAI's Batch API and Anthropic's Message Batches bill half of the interactive price


def batch_price_of(provider: str, model: str, price: tuple[float, float] | None) -> tuple[float, float] | None:
    """(input, output) USD per million tokens through the provider's batch API: litellm's batch prices for
    the model when it lists them, else ``price`` (the interactive one, or a role's own) at the batch discount."""
    entry = _listed(provider, model)
    if entry is not None and entry[4] is not None and entry[5] is not None and price == price_of(provider, model):
        return (round(entry[4] * 1e6, 6), round(entry[5] * 1e6, 6))
    return None if price is None else (price[0] * BATCH_DISCOUNT, price[1] * BATCH_DISCOUNT)


def known_models(provider: str) -> list[str]:
    """The chat models litellm prices for ``provider`` (fine-tune templates left out)."""
    return sorted(name for name, e in cost_map().items()
                  if e[0] == provider and e[1] == "chat" and "/" not in name and not name.startswith("ft:")
                  and e[2] is not None)


def similar_models(provider: str, model: str, n: int = 5) -> list[str]:
    """Priced models whose names are closest to ``model`` (for an error message)."""
    return difflib.get_close_matches(model, known_models(provider), n=n, cutoff=0.5)


def cost_usd(price: tuple[float, float] | None, input_tokens: int, output_tokens: int) -> float:
    if price is None:
        return 0.0
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
