"""Prices of the models Engram is likely to call, in USD per million tokens.

Prices change; the table is a convenience for usage reports, not billing. A
model that is not listed (or is listed as ``None``: a local or unknown price)
gives ``cost_usd=None``, never a guess. Dated snapshots such as
``gpt-4o-mini-2024-07-18`` use the price of their longest listed prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.llm.model_names import table_key


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per one million input and output tokens, and input tokens read from the cache.

    ``cached_input_per_m`` is None when the provider gives no prompt-cache discount.
    """

    input_per_m: float
    output_per_m: float
    cached_input_per_m: float | None = None


#: Known prices (USD per 1M tokens). ``None`` means "known model, unknown price".
PRICES: dict[str, ModelPrice | None] = {
    "gpt-4o-mini": ModelPrice(0.15, 0.60, 0.075),
    "gpt-4o": ModelPrice(2.50, 10.00, 1.25),
    "gpt-4.1": ModelPrice(2.00, 8.00, 0.50),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60, 0.10),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40, 0.025),
    "gpt-5": ModelPrice(1.25, 10.00, 0.125),
    "gpt-5-mini": ModelPrice(0.25, 2.00, 0.025),
    "gpt-5-nano": ModelPrice(0.05, 0.40, 0.005),
    "o4-mini": ModelPrice(1.10, 4.40, 0.275),
    "o3-mini": ModelPrice(1.10, 4.40, 0.55),
    "gpt-3.5-turbo": ModelPrice(0.50, 1.50),
    "grok-4": ModelPrice(3.00, 15.00, 0.75),
    "grok-3": ModelPrice(3.00, 15.00, 0.75),
    "grok-3-mini": ModelPrice(0.30, 0.50, 0.075),
    "claude-sonnet-4": ModelPrice(3.00, 15.00, 0.30),
    "claude-opus-4": ModelPrice(15.00, 75.00, 1.50),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00, 0.08),
    # Local or self-hosted models have no per-token price.
    "llama": None,
    "qwen": None,
    "mistral": None,
}


def price_for(model: str) -> ModelPrice | None:
    """Return the price of ``model`` by exact name, else by its longest listed prefix, else None."""
    key = table_key(PRICES, model)
    return PRICES[key] if key is not None else None


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """Cost of one call in USD, or None when the model's price is unknown."""
    price = price_for(model)
    if price is None:
        return None
    return (input_tokens * price.input_per_m + output_tokens * price.output_per_m) / 1_000_000


def input_cost_usd(model: str, input_tokens: int, cached_tokens: int = 0) -> float | None:
    """Cost of a prompt in USD, ``cached_tokens`` of it read from the provider's cache.

    Cached tokens cost the cached price when the model has one (else the full
    price); None when the model's price is unknown.
    """
    price = price_for(model)
    if price is None:
        return None
    cached = min(max(0, cached_tokens), input_tokens)
    rate = price.input_per_m
    cached_rate = rate if price.cached_input_per_m is None else price.cached_input_per_m
    return ((input_tokens - cached) * rate + cached * cached_rate) / 1_000_000
