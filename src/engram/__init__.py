"""Engram: conversation memory for LLM applications.

Every message kept forever, a prompt that always fits the budget, and tools
for the model to recall anything it no longer sees::

    import engram
    mem = engram.open()                              # sqlite:///./engram.db or ENGRAM_URL
    chat = mem.session("chat-42", scope="phoenix")
    chat.add("user", "What did we decide about pricing last week?")
    ctx = chat.context(budget=8000, system="You are a project assistant.", model="gpt-4o-mini")

The names below are loaded on first use (PEP 562), so ``import engram`` costs
almost nothing and a program pays only for the parts it touches;
``from engram import Engram`` works as usual.
"""

import importlib

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers treat the name alike).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from engram import chat, tools
    from engram.aio import AsyncEngram, AsyncSession, open_async
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
del TYPE_CHECKING

__version__ = "0.1.0"

#: The async facade (kept apart: its tests name it as the part loaded on first use).
_ASYNC = ("AsyncEngram", "AsyncSession", "open_async")

_ERRORS = (
    "ConfigError",
    "CorruptedData",
    "DateParseError",
    "EngramError",
    "ImportFormatError",
    "InvalidMessage",
    "InvalidQuery",
    "LLMError",
    "MemoryNotFound",
    "MessageNotFound",
    "NotFound",
    "SessionNotFound",
    "StoreError",
)

#: Every exported name and the module that defines it (the TYPE_CHECKING imports above mirror it).
_LAZY: dict[str, str] = {
    **dict.fromkeys(_ASYNC, "engram.aio"),
    **dict.fromkeys(_ERRORS, "engram.errors"),
    "CompactionResult": "engram.compaction.cycle",
    "Config": "engram.config",
    "Context": "engram.context",
    "Section": "engram.context",
    "FROM_ENV": "engram.engine",
    "Engram": "engram.engine",
    "open": "engram.engine",
    "LLMClient": "engram.llm",
    "Memories": "engram.memories",
    "MemoryRecord": "engram.models",
    "Message": "engram.models",
    "SearchHit": "engram.models",
    "SessionInfo": "engram.models",
    "PRESETS": "engram.policy",
    "Policy": "engram.policy",
    "get_policy": "engram.policy",
    "Session": "engram.session",
    "Store": "engram.store",
    "open_store": "engram.store",
    "TokenCounter": "engram.tokens",
    "counter_for_model": "engram.tokens",
}


#: Submodules reachable as attributes of ``engram`` (loaded on first use).
_SUBMODULES = ("chat", "tools")


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        return importlib.import_module(f"engram.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "FROM_ENV",
    "PRESETS",
    "AsyncEngram",
    "AsyncSession",
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
    "chat",
    "counter_for_model",
    "get_policy",
    "open",
    "open_async",
    "open_store",
    "tools",
]
