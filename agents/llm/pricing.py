"""Prices in USD per million tokens (input, output), from litellm's cost map.

The map is the copy bundled with the installed litellm (``LITELLM_LOCAL_MODEL_COST_MAP``,
set before litellm is imported, so nothing is fetched), read in a child process and kept
here as (provider, mode, input and output cost per token) per model: importing litellm
takes seconds and leaves about 340,000 more objects in the process (44,000 before it in a
client's process), which every full collection of the cyclic garbage collector then
walks while the LLM client works (`evosyn bench llm`). A model is priced when the map
lists it, or the dated snapshot or ``-latest`` alias of a listed model, under the
same provider. A role may set ``input_cost_per_mtok`` / ``output_cost_per_mtok`` to
override the price or to use a model the map does not list. Models behind an
``openai_compatible`` server (vLLM, llamafactory-cli api) are self-hosted and cost 0
unless the role sets prices.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

# a dated snapshot or alias of a listed model: gpt-4o-2024-08-06, claude-sonnet-4-5-20250929, …-latest
_SNAPSHOT = re.compile(r"(-\d{4}-?\d{2}-?\d{2}|-latest)$")


Entry = tuple  # (litellm_provider, mode, input_cost_per_token, output_cost_per_token), each possibly None

_EXTRACT = """
import json, sys
import litellm
rows = {name: [e.get("litellm_provider"), e.get("mode"), e.get("input_cost_per_token"),
               e.get("output_cost_per_token")] for name, e in litellm.model_cost.items() if isinstance(e, dict)}
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(rows, f)
"""


@lru_cache(maxsize=1)
def cost_map() -> dict[str, Entry]:
    """litellm's model -> (provider, mode, input and output cost per token), read once per process by a child
    process that imports litellm (the module doc says why not this one)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # the bundled map, never the network
    with tempfile.TemporaryDirectory(prefix="evosyn-prices-") as tmp:
        out = Path(tmp) / "prices.json"
        proc = subprocess.run([sys.executable, "-c", _EXTRACT, str(out)], env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        if proc.returncode != 0 or not out.is_file():
            last = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"reading litellm's bundled cost map in a child process failed "
                               f"(exit {proc.returncode}): {last[0][:300]}")
        rows = json.loads(out.read_text(encoding="utf-8"))
    return {name: tuple(row) for name, row in rows.items()}


def _entry(provider: str, model: str) -> Entry | None:
    table = cost_map()
    for name in (model, f"{provider}/{model}"):
        entry = table.get(name)
        if entry and entry[0] == provider and entry[2] is not None and entry[3] is not None:
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
    return (round(entry[2] * 1e6, 6), round(entry[3] * 1e6, 6))


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
