"""A ChatGPT export (``conversations.json``) made of benchmark text, for the import benchmark.

Each conversation is a chain of user and assistant turns, as ChatGPT exports
them (a root node, one node per message, ``current_node`` at the last one),
with increasing creation times.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

#: Messages per conversation in the generated export.
CONVERSATION = 50
_T0 = 1_741_000_000.0


def chatgpt_export(
    messages: Sequence[dict[str, Any]], per_conversation: int = CONVERSATION
) -> bytes:
    """``conversations.json`` holding ``messages`` (role and content), ``per_conversation`` each."""
    conversations = []
    for c, start in enumerate(range(0, len(messages), per_conversation)):
        chunk = messages[start : start + per_conversation]
        mapping: dict[str, Any] = {
            "root": {"id": "root", "parent": None, "children": ["n0"], "message": None}
        }
        for i, m in enumerate(chunk):
            node = f"n{i}"
            when = _T0 + c * 10_000 + i
            mapping[node] = {
                "id": node,
                "parent": "root" if i == 0 else f"n{i - 1}",
                "children": [f"n{i + 1}"] if i + 1 < len(chunk) else [],
                "message": {
                    "id": f"m-{c}-{i}",
                    "author": {"role": m["role"], "name": None, "metadata": {}},
                    "create_time": when,
                    "content": {"content_type": "text", "parts": [m["content"]]},
                    "status": "finished_successfully",
                    "recipient": "all",
                    "metadata": {},
                },
            }
        conversations.append(
            {
                "title": f"Conversation {c}",
                "create_time": _T0 + c * 10_000,
                "update_time": _T0 + c * 10_000 + len(chunk),
                "mapping": mapping,
                "current_node": f"n{len(chunk) - 1}",
                "conversation_id": f"conv-{c}",
                "id": f"conv-{c}",
            }
        )
    return json.dumps(conversations).encode()


def import_file(path: str, url: str) -> int:
    """Import ``path`` (a ChatGPT export) as ``engram import`` does, without the process start.

    Returns the messages imported.
    """
    import engram
    from engram.ingest import ingest
    from engram.transfer.importers import read_import

    mem = engram.open(url, llm=None)
    try:
        batches = read_import(path, fmt="chatgpt")
        return ingest(mem, "import", batches).new
    finally:
        mem.close()
