"""Prices come from litellm's bundled cost map (offline), with a clear result for unlisted models."""
import pytest

from agents.llm.pricing import cost_usd, known_models, price_of, similar_models


def test_listed_models_are_priced_as_litellm_prices_them():
    import litellm

    assert price_of("openai", "gpt-4o") == (2.5, 10.0)  # the published list price, per million tokens
    for provider, model in (("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4-5")):
        expected = sum(litellm.cost_per_token(model=model, prompt_tokens=1200, completion_tokens=300,
                                              custom_llm_provider=provider))
        assert cost_usd(price_of(provider, model), 1200, 300) == pytest.approx(expected, rel=1e-9)


def test_snapshots_and_aliases_resolve_to_the_listed_model():
    assert price_of("openai", "gpt-4o-2024-08-06") == price_of("openai", "gpt-4o")
    assert price_of("anthropic", "claude-sonnet-4-5-20250929") == price_of("anthropic", "claude-sonnet-4-5")
    assert price_of("anthropic", "claude-sonnet-4-5-latest") == price_of("anthropic", "claude-sonnet-4-5")


def test_unlisted_models_have_no_price_and_cost_nothing():
    assert price_of("openai", "gpt-17") is None and cost_usd(None, 1000, 1000) == 0.0
    assert price_of("anthropic", "gpt-4o") is None  # listed, but under another provider
    assert price_of("openai", "") is None and price_of("", "gpt-4o") is None
    assert "gpt-4o" in known_models("openai") and not any(m.startswith("ft:") for m in known_models("openai"))
    assert "gpt-4o" in similar_models("openai", "gpt4o")


def test_the_map_is_litellm_s_own_read_in_a_child_process():
    """Every model litellm's bundled map lists, with its provider, mode and prices; litellm itself never
    imported by the lookup (the price map's process keeps none of its objects)."""
    import subprocess
    import sys

    from agents.llm.pricing import cost_map

    probe = ("import sys; from agents.llm.pricing import price_of; p = price_of('openai', 'gpt-4o'); "
             "print(p, 'litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["(2.5,", "10.0)", "False"]
    import litellm

    table = cost_map()
    listed = {k: v for k, v in litellm.model_cost.items() if isinstance(v, dict)}
    assert set(table) == set(listed)
    for name, e in listed.items():
        assert table[name] == (e.get("litellm_provider"), e.get("mode"), e.get("input_cost_per_token"),
                               e.get("output_cost_per_token")), name
