"""Looking a model up in a table by name: exact, else its longest listed prefix.

Dated snapshots (``gpt-4o-mini-2024-07-18``) and vendor prefixes
(``openai/gpt-4o-mini``, as OpenRouter names them) find their base model's row.
"""

from __future__ import annotations

from collections.abc import Mapping


def table_key(table: Mapping[str, object], model: str) -> str | None:
    """The key of ``table`` that ``model`` falls under, or None."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name in table:
        return name
    best: str | None = None
    for key in table:
        if name.startswith(key + "-") and (best is None or len(key) > len(best)):
            best = key
    return best
