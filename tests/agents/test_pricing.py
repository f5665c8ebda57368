"""Prices come from litellm's bundled cost map (offline), with a clear result for unlisted models."""
import pytest

from evosyn.agents.llm.pricing import cost_usd, known_models, price_of, similar_models


def test_listed_models_are_priced_as_litellm_s_map_lists_them():
    # the published list prices, per million tokens, as the bundled JSON holds them
    assert price_of("openai", "gpt-4o") == (2.5, 10.0)
    assert price_of("openai", "gpt-4o-mini") == (0.15, 0.6)
    assert price_of("anthropic", "claude-sonnet-4-5") == (3.0, 15.0)
    assert cost_usd(price_of("openai", "gpt-4o"), 1200, 300) == pytest.approx((1200 * 2.5 + 300 * 10.0) / 1e6)


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


def test_the_map_is_the_wheel_s_json_read_without_importing_litellm():
    """The whole bundled map (thousands of models, with provider and mode), and litellm never imported."""
    import subprocess
    import sys

    from evosyn.agents.llm.pricing import cost_map

    probe = ("import sys; from evosyn.agents.llm.pricing import cost_map, price_of; p = price_of('openai', 'gpt-4o'); "
             "print(p, len(cost_map()) > 1000, 'litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["(2.5,", "10.0)", "True", "False"]
    assert cost_map()["gpt-4o"][:2] == ("openai", "chat")
    assert cost_map()["claude-sonnet-4-5"][:2] == ("anthropic", "chat")


def test_batch_prices_are_litellms_batch_rates_else_half_the_price():
    from evosyn.agents.llm.pricing import batch_price_of, price_of

    listed = price_of("openai", "gpt-4o-mini")
    assert batch_price_of("openai", "gpt-4o-mini", listed) == (0.075, 0.3) == tuple(p / 2 for p in listed)
    assert batch_price_of("anthropic", "claude-haiku-4-5", price_of("anthropic", "claude-haiku-4-5")) == (0.5, 2.5)
    assert batch_price_of("openai", "gpt-4o-mini", (1.0, 2.0)) == (0.5, 1.0)  # a role's own price: at the discount
    assert batch_price_of("openai", "no-such-model", None) is None
