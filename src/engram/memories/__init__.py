"""Long-term memories per scope (seed 003): created when conversations end, capped, injected.

::

    from engram.memories import Memories, MemoryWorker, end_session

    memories = Memories(store, "phoenix", llm=client, cap=10)
    memories.create("User prefers meetings after 2pm on weekdays.")
    end_session(memories, "chat-42", "user closed", worker=worker)   # off the caller's path
    print(memories.context_text())                                  # seed 003's prompt block

Importing this package registers the ``search_memories`` tool.
"""

from engram.memories import tool as _tool  # registers search_memories
from engram.memories.budget import PENDING_KIND, PURPOSE_COMPACT, PURPOSE_CREATE, MemoryBudget
from engram.memories.compaction import DECISION_PROMPT, Decision
from engram.memories.context import SECTION_TITLE, format_memories
from engram.memories.creation import CREATION_PROMPT
from engram.memories.ending import LIFECYCLE_KIND, MemoryWorker, end_session
from engram.memories.metrics import MemoryMetrics
from engram.memories.records import DEFAULT_CAP, MAX_CONTENT_CHARS, Outcome
from engram.memories.service import DEFAULT_TIMEOUT, Memories

del _tool

__all__ = [
    "CREATION_PROMPT",
    "DECISION_PROMPT",
    "DEFAULT_CAP",
    "DEFAULT_TIMEOUT",
    "LIFECYCLE_KIND",
    "MAX_CONTENT_CHARS",
    "PENDING_KIND",
    "PURPOSE_COMPACT",
    "PURPOSE_CREATE",
    "SECTION_TITLE",
    "Decision",
    "Memories",
    "MemoryBudget",
    "MemoryMetrics",
    "MemoryWorker",
    "Outcome",
    "end_session",
    "format_memories",
]
