"""The ``Engram`` facade: one object from which sessions, messages and memories are reached.

The engine validates input, counts tokens once (at insert, in the storage
encoding), and delegates storage to a :class:`~engram.store.Store` and prompt
planning to :mod:`engram.context`. It holds no conversation data itself, so
many ``Engram`` objects (threads, processes, servers) can share one database.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engram.agent import compact_stored_agent_state
from engram.compaction.background import BackgroundCompactor
from engram.compaction.runner import CompactionResult, compact_session
from engram.compaction.summarizer import LLMSummarizer, OfflineSummarizer, Summarizer
from engram.context import Section
from engram.errors import ConfigError, InvalidQuery, MessageNotFound
from engram.llm.client import LLMClient
from engram.memories import DEFAULT_CAP, Memories, MemoryBudget, MemoryMetrics, MemoryWorker
from engram.memories import SECTION_TITLE as MEMORIES_SECTION_TITLE
from engram.models import Message, NewMessage, SessionInfo
from engram.policy import Policy, get_policy
from engram.session import (
    DEFAULT_BUDGET,
    PREREAD_ROWS,
    TOOL_CALL_LOOKBACK,
    Session,
    has_triggers,
)
from engram.store import Store, open_store
from engram.tokens import count_message, storage_counter
from engram.validation import check_id

if TYPE_CHECKING:
    from engram.queue_worker import QueueWorker

__all__ = [
    "DEFAULT_BUDGET",
    "FROM_ENV",
    "PREREAD_ROWS",
    "TOOL_CALL_LOOKBACK",
    "Engram",
    "MemoriesProvider",
    "Session",
    "has_triggers",
    "open",
]

logger = logging.getLogger("engram")

#: ``llm=FROM_ENV``: configure the model from ``ENGRAM_LLM_*`` (none set: no model).
FROM_ENV: Final = "from env"

#: Gives the long-term memories of a scope as prompt text (None or "": none).
MemoriesProvider = Callable[[str], "str | None"]


class Engram:
    """Conversation memory over one store. Thread-safe; cheap to create."""

    def __init__(
        self,
        store: Store,
        *,
        tz: str = "UTC",
        llm: LLMClient | str | None = FROM_ENV,
        memories_text: MemoriesProvider | None = None,
        memory_cap: int = DEFAULT_CAP,
        memory_budget: MemoryBudget | None = None,
        run_jobs: bool = True,
    ) -> None:
        """Wrap ``store``.

        Args:
            store: Where everything lives.
            tz: Time zone date phrases are read in.
            llm: The model that writes summaries: an :class:`LLMClient`, None
                for no model (offline summaries), or :data:`FROM_ENV` (the
                default) to read ``ENGRAM_LLM_BASE_URL`` / ``_API_KEY`` /
                ``_MODEL``. A client built from the environment is closed by
                :meth:`close`; a client passed in belongs to the caller.
            memories_text: Gives a scope's long-term memories as prompt text;
                shown after the system prompt (seed 001's order). Default:
                the scope's stored memories in seed 003's format.
            memory_cap: Long-term memories kept per scope (seed 003: 10).
            memory_budget: Energy budget for memory work (default: unlimited).
            run_jobs: On PostgreSQL, run jobs of the shared queue in a worker
                thread of this object (started now). False: only enqueue, and
                leave the jobs to other processes (web servers with dedicated
                workers). Other stores run background work in process and
                ignore it. See :mod:`engram.queue_worker`.

        """
        self.store = store
        try:
            self.tz = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown time zone {tz!r}") from None
        self._counter = storage_counter()
        self._owns_llm = False
        if isinstance(llm, str):
            if llm != FROM_ENV:
                raise ConfigError(f"llm must be an LLMClient, None or {FROM_ENV!r}, got {llm!r}")
            self.llm: LLMClient | None = LLMClient.from_env()
            self._owns_llm = self.llm is not None
        elif llm is None or isinstance(llm, LLMClient):
            self.llm = llm
        else:
            raise ConfigError(f"llm must be an LLMClient or None, got {type(llm).__name__}")
        self.memories_text: MemoriesProvider = memories_text or self._stored_memories_text
        self.memory_cap = memory_cap
        self.memory_budget = memory_budget or MemoryBudget()
        self.memory_metrics = MemoryMetrics()
        self._memory_worker: MemoryWorker | None = None
        self._background: BackgroundCompactor | None = None
        self._background_lock = threading.Lock()
        self._closed = False
        self.jobs: QueueWorker | None = None
        """On PostgreSQL, this object's side of the shared job queue; else None."""
        if _is_postgres(store):
            from engram.queue_worker import QueueWorker

            # Last: nothing after it may fail and leave the thread running.
            self.jobs = QueueWorker(self, store, run_jobs=run_jobs)  # type: ignore[arg-type]

    # -- sessions and messages ----------------------------------------------------

    def session(
        self,
        session_id: str,
        scope: str = "default",
        *,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> Session:
        """A handle on one conversation. The session is created on first write.

        A ``policy`` (preset name, :class:`Policy` or dict) is stored with the
        session so background work and later handles use it too.
        """
        check_id("scope", scope)
        check_id("session", session_id)
        resolved = get_policy(policy) if policy is not None else None
        if resolved is not None:
            self.store.ensure_session(scope, session_id, policy=resolved.to_dict())
        return Session(self, scope, session_id, resolved)

    def message(self, message_id: int, scope: str = "default") -> Message:
        """One stored message by id, only if it belongs to ``scope``."""
        if isinstance(message_id, bool) or not isinstance(message_id, int):
            raise InvalidQuery(f"message id must be an integer, got {message_id!r}")
        found = self.store.get_message(scope, message_id)
        if found is None:
            raise MessageNotFound(f"no message {message_id} in scope {scope!r}")
        return found

    def sessions(
        self, scope: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        return self.store.list_sessions(scope, limit=limit, offset=offset)

    def scopes(self) -> list[str]:
        """Every scope with a session or a memory."""
        return self.store.list_scopes()

    def count(self, message: NewMessage) -> int:
        """Exact size of a message in the storage encoding, chat overhead included."""
        return count_message(
            self._counter,
            message.role,
            message.content,
            name=message.name,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
        )

    # -- compaction ----------------------------------------------------------------

    def summarizer(self) -> Summarizer:
        """The model's summarizer (with the offline fallback), or the offline one."""
        return LLMSummarizer(self.llm) if self.llm is not None else OfflineSummarizer()

    @property
    def background(self) -> BackgroundCompactor:
        """The background compaction worker (started on first use)."""
        with self._background_lock:
            if self._background is None:
                if self._closed:
                    raise ConfigError("this Engram is closed")
                self._background = BackgroundCompactor()
            return self._background

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no background work is queued or running; False on timeout.

        On PostgreSQL this includes every job of the shared queue enqueued by
        this object (compactions and memories), whichever server runs it.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._background_lock:
            worker = self._background
        if worker is not None and not worker.wait_idle(timeout):
            return False
        if self.jobs is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            return self.jobs.wait_idle(left)
        return True

    def compact(
        self, scope: str, session: str, policy: Policy, *, extra_tokens: int = 0
    ) -> CompactionResult:
        """One compaction cycle of a session, then seed 002's agent-state rules."""
        result = compact_session(
            self.store, scope, session, policy, self.summarizer(), extra_tokens=extra_tokens
        )
        compact_stored_agent_state(self.store, scope, session)
        return result

    def memories_section(self, scope: str) -> Section | None:
        """The scope's long-term memories as a prompt section, or None when it has none."""
        text = self.memories_text(scope)
        return Section(MEMORIES_SECTION_TITLE, text) if text and text.strip() else None

    # -- long-term memories (seed 003) ----------------------------------------------

    def memories(self, scope: str = "default") -> Memories:
        """The long-term memories of a scope: create, list, get, update, delete, purge, audit."""
        check_id("scope", scope)
        return Memories(
            self.store,
            scope,
            llm=self.llm,
            cap=self.memory_cap,
            budget=self.memory_budget,
            metrics=self.memory_metrics,
        )

    def _stored_memories_text(self, scope: str) -> str:
        return self.memories(scope).context_text(tz=self.tz)

    @property
    def memory_worker(self) -> MemoryWorker:
        """The background worker that writes end-of-session memories (started on first use)."""
        with self._background_lock:
            if self._memory_worker is None:
                if self._closed:
                    raise ConfigError("this Engram is closed")
                self._memory_worker = MemoryWorker()
            return self._memory_worker

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Stop background work, close an owned model client, close the store. Safe twice."""
        with self._background_lock:
            self._closed = True
            worker, self._background = self._background, None
            memory_worker, self._memory_worker = self._memory_worker, None
        if self.jobs is not None:
            self.jobs.close()  # the running job finishes; queued jobs stay for other workers
        if worker is not None:
            worker.close(wait=True)  # running compactions finish before the store closes
        if memory_worker is not None:
            memory_worker.close(wait=True)  # so do memories being written
        if self._owns_llm and self.llm is not None:
            self.llm.close()
            self._owns_llm = False
        self.store.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Engram({self.store.url!r})"


def _is_postgres(store: object) -> bool:
    """Tell whether ``store`` is a PostgreSQL store, without importing psycopg for the others."""
    module = sys.modules.get("engram.store.postgres")
    # Not imported: then no PostgresStore exists, and SQLite users never load psycopg.
    return module is not None and isinstance(store, module.PostgresStore)


def open(
    url: str | None = None,
    *,
    tz: str | None = None,
    llm: LLMClient | str | None = FROM_ENV,
    memory_cap: int = DEFAULT_CAP,
    memory_budget: MemoryBudget | None = None,
    run_jobs: bool = True,
    **store_options: Any,
) -> Engram:
    """Open Engram on a store URL (default: ``ENGRAM_URL``, else ``sqlite:///./engram.db``).

    ``tz`` (default ``ENGRAM_TZ`` or UTC) is the time zone date phrases are read in.
    ``llm`` is the summarizing model: a client, None (no model), or
    :data:`FROM_ENV` (default: ``ENGRAM_LLM_*`` variables; none set, no model).
    ``memory_cap`` and ``memory_budget`` govern long-term memories (seed 003).
    ``run_jobs=False`` (PostgreSQL only): enqueue background jobs but leave
    them to other processes' workers.
    """
    store = open_store(url or os.environ.get("ENGRAM_URL"), **store_options)
    try:
        return Engram(
            store,
            tz=tz or os.environ.get("ENGRAM_TZ", "UTC"),
            llm=llm,
            memory_cap=memory_cap,
            memory_budget=memory_budget,
            run_jobs=run_jobs,
        )
    except BaseException:
        store.close()
        raise
