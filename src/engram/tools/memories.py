"""The ``search_memories`` tool: the model looks up its scope's long-term memories.

Registered in :data:`engram.tools.TOOLS` like the retrieval tools, so it is in
:func:`engram.tools.schemas` (every flavor) and :func:`engram.tools.dispatch`.
The scope comes from the bound session, never from the model: a model can
only ever search the memories of the conversation's own scope.
"""

from __future__ import annotations

from typing import Annotated

from engram.memories.records import memory_json
from engram.models import JSON
from engram.tools.registry import ToolSession, tool
from engram.tools.schema import Length, Range

#: Most memories one ``search_memories`` call returns.
MAX_MEMORY_RESULTS = 20
#: Longest memory query accepted, in characters.
MAX_MEMORY_QUERY_CHARS = 500


@tool(items_key="results")
def search_memories(
    session: ToolSession,
    query: Annotated[str, Length(1, MAX_MEMORY_QUERY_CHARS)],
    limit: Annotated[int, Range(1, MAX_MEMORY_RESULTS)] = 5,
) -> JSON:
    """Search the long-term memories kept from earlier conversations of this project, best first.

    Use it when the user refers to a preference, fact or decision from a
    previous conversation that is not in your context.

    Args:
        session: The bound session (hidden from the model).
        query: Keywords to look for, as plain text.
        limit: Most memories to return.
    """
    found = session.memories().ranked(query, limit=limit)
    results = []
    for score, memory in found:
        item = memory_json(memory)
        del item["scope"], item["metadata"]
        item["score"] = round(score, 3)
        results.append(item)
    return {"query": query, "count": len(results), "results": results}
