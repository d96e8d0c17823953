"""The language-model client: OpenAI-compatible chat completions, retries, usage and cost."""

from engram.llm.client import LLMClient, LLMResult
from engram.llm.prices import PRICES, ModelPrice, cost_usd, price_for
from engram.llm.replies import parse_json_object

__all__ = [
    "PRICES",
    "LLMClient",
    "LLMResult",
    "ModelPrice",
    "cost_usd",
    "parse_json_object",
    "price_for",
]
