"""Context windows of the models Engram is likely to call, in tokens (prompt and answer together).

The proxy's default budget is the model's window. Windows change and vary by
provider; the table is a starting point, and a model that is not listed gets
:data:`DEFAULT_WINDOW` (the server's ``--budget`` or a request's
``X-Engram-Budget`` header says otherwise). Dated snapshots use their base
model's row, as prices do.
"""

from __future__ import annotations

from engram.llm.model_names import table_key

#: Window of a model the table does not know (local servers often run 8K contexts).
DEFAULT_WINDOW = 8_192

#: Known context windows, in tokens.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o-latest": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "grok-4": 256_000,
    "grok-3": 131_072,
    "grok-3-mini": 131_072,
    "grok-2": 131_072,
    "claude": 200_000,
    "gemini": 1_048_576,
    "deepseek-chat": 65_536,
    "deepseek-reasoner": 65_536,
}


def context_window(model: str) -> int | None:
    """The window of ``model`` by exact name, else by its longest listed prefix, else None."""
    key = table_key(CONTEXT_WINDOWS, model)
    return CONTEXT_WINDOWS[key] if key is not None else None
