"""Engram: conversation memory for LLM applications.

Every message kept forever, a prompt that always fits the budget, and tools
for the model to recall anything it no longer sees::

    import engram
    mem = engram.open()                              # sqlite:///./engram.db or ENGRAM_URL
    chat = mem.session("chat-42", scope="phoenix")
    chat.add("user", "What did we decide about pricing last week?")
    ctx = chat.context(budget=8000, system="You are a project assistant.", model="gpt-4o-mini")
"""

import typing as _typing

from engram.compaction.cycle import CompactionResult
from engram.config import Config
from engram.context import Context, Section
from engram.engine import FROM_ENV, Engram, open
from engram.errors import (
    ConfigError,
    CorruptedData,
    DateParseError,
    EngramError,
    ImportFormatError,
    InvalidMessage,
    InvalidQuery,
    LLMError,
    MemoryNotFound,
    MessageNotFound,
    NotFound,
    SessionNotFound,
    StoreError,
)
from engram.llm import LLMClient
from engram.memories import Memories
from engram.models import MemoryRecord, Message, SearchHit, SessionInfo
from engram.policy import PRESETS, Policy, get_policy
from engram.session import Session
from engram.store import Store, open_store
from engram.tokens import TokenCounter, counter_for_model

if _typing.TYPE_CHECKING:
    from engram import tools

__version__ = "0.1.0"

#: Loaded on first use, so ``import engram`` does not import asyncio.
_ASYNC = ("AsyncEngram", "AsyncSession", "open_async")


def __getattr__(name: str) -> object:
    # ``engram.tools`` (schemas derived from signatures, the chat loop) and the async
    # API are imported on first use, so ``import engram`` stays fast without them.
    if name in _ASYNC:
        from engram import aio

        return getattr(aio, name)
    if name == "tools":
        import engram.tools

        return engram.tools
    raise AttributeError(f"module 'engram' has no attribute {name!r}")


__all__ = [
    "FROM_ENV",
    "PRESETS",
    "CompactionResult",
    "Config",
    "ConfigError",
    "Context",
    "CorruptedData",
    "DateParseError",
    "Engram",
    "EngramError",
    "ImportFormatError",
    "InvalidMessage",
    "InvalidQuery",
    "LLMClient",
    "LLMError",
    "Memories",
    "MemoryNotFound",
    "MemoryRecord",
    "Message",
    "MessageNotFound",
    "NotFound",
    "Policy",
    "SearchHit",
    "Section",
    "Session",
    "SessionInfo",
    "SessionNotFound",
    "Store",
    "StoreError",
    "TokenCounter",
    "__version__",
    "counter_for_model",
    "get_policy",
    "open",
    "open_store",
    "tools",
    *_ASYNC,
]
