"""Long-term memories per scope: created when conversations end, capped, injected.

::

    from engram.memories import Memories
    from engram.background.local import MemoryWorker, end_session

    memories = Memories(store, "phoenix", llm=client, cap=10)
    memories.create("User prefers meetings after 2pm on weekdays.")
    end_session(memories, "chat-42", "user closed", worker=worker)   # off the caller's path
    print(memories.context_text())                                  # the prompt block

The ``search_memories`` tool that reads them is in :mod:`engram.tools.memories`.
"""

from engram.memories.budget import PENDING_KIND, PURPOSE_COMPACT, PURPOSE_CREATE, MemoryBudget
from engram.memories.creation import CREATION_PROMPT
from engram.memories.ending import LIFECYCLE_KIND
from engram.memories.eviction import DECISION_PROMPT, Decision
from engram.memories.metrics import MemoryMetrics
from engram.memories.records import DEFAULT_CAP, MAX_CONTENT_CHARS, CreatedMemory, Outcome
from engram.memories.rendering import MEMORIES_KIND, SECTION_TITLE, format_memories
from engram.memories.service import DEFAULT_TIMEOUT, Memories

__all__ = [
    "CREATION_PROMPT",
    "DECISION_PROMPT",
    "DEFAULT_CAP",
    "DEFAULT_TIMEOUT",
    "LIFECYCLE_KIND",
    "MAX_CONTENT_CHARS",
    "MEMORIES_KIND",
    "PENDING_KIND",
    "PURPOSE_COMPACT",
    "PURPOSE_CREATE",
    "SECTION_TITLE",
    "CreatedMemory",
    "Decision",
    "Memories",
    "MemoryBudget",
    "MemoryMetrics",
    "Outcome",
    "format_memories",
]
