"""The memory tools: the model reads, and with write rights changes, its scope's memories.

``search_memories`` is installed in :data:`engram.tools.TOOLS` like the
retrieval tools, so every chat loop offers it. The others (list, add, edit,
delete) are declared here and gathered in :data:`engram.tools.MEMORY_TOOLS`
without being installed: a model in an ordinary chat never gets to delete a
memory; interfaces that mean to offer them (the MCP server) pass them as their
own registry. The three that change memories are declared ``writes=True``, so
a read-only caller can leave them out.

The scope comes from the bound session, never from the model: a model can
only ever see or change the memories of the conversation's own scope.
"""

from __future__ import annotations

from typing import Annotated

from engram.errors import MemoryNotFound, NotFound
from engram.flags import flags
from engram.memories.records import MAX_CONTENT_CHARS, memory_json
from engram.models import JSON, MemoryRecord
from engram.tools.registry import ToolSession, tool
from engram.tools.schema import Length, Range

#: Most memories one ``search_memories`` call returns.
MAX_MEMORY_RESULTS = 20
#: Longest memory query accepted, in characters.
MAX_MEMORY_QUERY_CHARS = 500


@tool(items_key="results", recalls=True)
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
        item = _shown(memory)
        item["score"] = round(score, 3)
        results.append(item)
    return {"query": query, "count": len(results), "results": results}


@tool(items_key="memories", recalls=True)
def list_memories(session: ToolSession) -> JSON:
    """List every long-term memory of this project, oldest first (a project keeps only a few)."""
    memories = [_shown(memory) for memory in session.memories().list()]
    return {"count": len(memories), "memories": memories}


@tool(writes=True)
def add_memory(
    session: ToolSession,
    content: Annotated[str, Length(1, MAX_CONTENT_CHARS)],
) -> JSON:
    """Remember a short fact, preference or decision for later conversations of this project.

    A memory that repeats an existing one is not stored twice; past the
    project's limit, the oldest or least useful memories are merged or dropped
    (the result's status says which happened).

    Args:
        session: The bound session (hidden from the model).
        content: The memory, one or two sentences.
    """
    created = session.memories().create(content, source_session=session.id)
    return {
        "status": created.status,
        "memory": _shown(created),
        "evicted": [_shown(memory) for memory in created.evicted],
    }


@tool(writes=True)
def edit_memory(
    session: ToolSession,
    memory_id: Annotated[int, Range(1, None)],
    content: Annotated[str, Length(1, MAX_CONTENT_CHARS)],
) -> JSON:
    """Replace the text of one memory of this project (ids come from list_memories).

    Args:
        session: The bound session (hidden from the model).
        memory_id: The memory to change.
        content: Its new text.
    """
    try:
        record = session.memories().update(memory_id, content)
    except NotFound:
        raise MemoryNotFound(f"no memory with id {memory_id}") from None
    return {"memory": _shown(record)}


@tool(writes=True)
def delete_memory(session: ToolSession, memory_id: Annotated[int, Range(1, None)]) -> JSON:
    """Forget one memory of this project (ids come from list_memories).

    Args:
        session: The bound session (hidden from the model).
        memory_id: The memory to delete.
    """
    try:
        session.memories().delete(memory_id)
    except NotFound:
        # One wording whether absent or in another scope: existence must not leak.
        raise MemoryNotFound(f"no memory with id {memory_id}") from None
    return {"deleted": memory_id}


def _shown(memory: MemoryRecord) -> JSON:
    """A memory as the model sees it: no scope (it is implied), no internal metadata.

    A memory that reads like instructions to a model says so in ``flags``.
    """
    item = memory_json(memory)
    del item["scope"], item["metadata"]
    found = flags(memory.content)
    if found:
        item["flags"] = list(found)
    return item
