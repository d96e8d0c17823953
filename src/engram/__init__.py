"""Engram: conversation memory for LLM applications.

Every message kept forever, a prompt that always fits the budget, and tools
for the model to recall anything it no longer sees::

    import engram
    mem = engram.open()                              # sqlite:///./engram.db or ENGRAM_URL
    chat = mem.session("chat-42", scope="phoenix")
    chat.add("user", "What did we decide about pricing last week?")
    ctx = chat.context(budget=8000, system="You are a project assistant.", model="gpt-4o-mini")
"""

from engram import tools
from engram.context import Context
from engram.engine import Engram, Session, open
from engram.errors import (
    ConfigError,
    EngramError,
    InvalidMessage,
    InvalidQuery,
    MessageNotFound,
    NotFound,
    StoreError,
)
from engram.models import Message, MemoryRecord, SearchHit, SessionInfo
from engram.policy import Policy, get_policy
from engram.store import Store, open_store

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Context",
    "Engram",
    "EngramError",
    "InvalidMessage",
    "InvalidQuery",
    "MemoryRecord",
    "Message",
    "MessageNotFound",
    "NotFound",
    "Policy",
    "SearchHit",
    "Session",
    "SessionInfo",
    "Store",
    "StoreError",
    "__version__",
    "get_policy",
    "open",
    "open_store",
    "tools",
]
