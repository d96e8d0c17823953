"""What every session of one ``Engram`` shares: store, counter, model, scheduler, settings.

The runtime is the layer between the thin handles (``Engram``, ``Session``)
and the parts below them. It owns no conversation data. Handles and
background workers get the runtime, never the facade, so calls only go down:

    Engram (composition root, scope-level operations)
      -> Session (one conversation: a handle)
        -> prompt assembly, compaction cycle, memories
          -> Runtime (store, counter, model, scheduler, config)
            -> store
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from engram.background import Scheduler, make_scheduler
from engram.background.deadline import DeadlinePool
from engram.background.pool import KeyedPool, embedding_pool
from engram.compaction.cycle import CompactionResult, Loaded, compact_session
from engram.compaction.metrics import CompactionMetrics
from engram.compaction.summarizer import LLMSummarizer, OfflineSummarizer, Summarizer
from engram.config import Config
from engram.context import Section, SectionSource
from engram.errors import InvalidQuery, MessageNotFound
from engram.flags import FlagMetrics
from engram.intake.checks import id_field
from engram.intake.checks import message_id as checked_message_id
from engram.llm.client import LLMClient
from engram.memories import MEMORIES_KIND, Memories, MemoryBudget, MemoryMetrics
from engram.memories import SECTION_TITLE as MEMORIES_SECTION_TITLE
from engram.memories.block import shown_memories
from engram.models import Message, NewMessage
from engram.policy import Policy, get_policy
from engram.prompt_log import PromptRecorder
from engram.search.embeddings import shared_embedder
from engram.search.vectors import Embedder, embed_pending, keeps_vectors
from engram.sections.agent_state import compact_stored_agent_state
from engram.store import Store
from engram.store.base import plans_search
from engram.tokens import TokenCounter, count_contents, count_new, storage_counter

log = logging.getLogger("engram")

#: Gives the long-term memories of a scope as prompt text (None or "": none).
MemoriesProvider = Callable[[str], "str | None"]
#: Sessions whose last prompt is remembered (search leaves its messages out).
VISIBLE_SESSIONS = 4096


@dataclass
class Runtime:
    """The shared parts of one ``Engram``. Build it with :meth:`create`."""

    store: Store
    config: Config
    tz: ZoneInfo
    llm: LLMClient | None
    memory_budget: MemoryBudget
    memory_metrics: MemoryMetrics = field(default_factory=MemoryMetrics)
    compaction_metrics: CompactionMetrics = field(default_factory=CompactionMetrics)
    flag_metrics: FlagMetrics = field(default_factory=FlagMetrics)
    memories_text: MemoriesProvider | None = None
    counter: TokenCounter = field(default_factory=storage_counter)
    scheduler: Scheduler = field(init=False)
    prompts: PromptRecorder = field(init=False)
    _sync: DeadlinePool[CompactionResult] = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _visible: OrderedDict[tuple[str, str], frozenset[int]] = field(
        init=False, default_factory=OrderedDict
    )
    embedder: Embedder | None = None
    _indexer: KeyedPool | None = field(init=False, default=None)

    @classmethod
    def create(
        cls,
        store: Store,
        config: Config,
        *,
        llm: LLMClient | None,
        memory_budget: MemoryBudget | None = None,
        memories_text: MemoriesProvider | None = None,
    ) -> Runtime:
        """Wire the parts; the scheduler's threads start last (nothing after may fail)."""
        runtime = cls(
            store=store,
            config=config,
            tz=ZoneInfo(config.tz),
            llm=llm,
            memory_budget=memory_budget or MemoryBudget(),
            memories_text=memories_text,
        )
        if plans_search(store):
            store.zone = runtime.tz  # date words are indexed in the engine's time zone
        if config.embeddings:
            runtime.embedder = shared_embedder()  # MissingDependency names the extra
            runtime._indexer = embedding_pool()
        runtime._sync = DeadlinePool()
        runtime.prompts = PromptRecorder(store)
        runtime.scheduler = make_scheduler(store, runtime, run_jobs=config.run_jobs)
        return runtime

    # -- vectors --------------------------------------------------------------------

    def embed_later(self, scope: str, session: str) -> bool:
        """Embed the session's new messages in the background (when embeddings are on)."""
        store, embedder, indexer = self.store, self.embedder, self._indexer
        if embedder is None or indexer is None or not keeps_vectors(store):
            return False
        return indexer.submit(
            ("embed", scope, session), lambda: embed_pending(store, embedder, scope, session)
        )

    def wait_vectors(self, timeout: float | None = None) -> bool:
        """Wait until every scheduled embedding is done; False on timeout."""
        return self._indexer.wait_idle(timeout) if self._indexer is not None else True

    # -- what the model sees ---------------------------------------------------------

    def remember_visible(self, scope: str, session: str, ids: Sequence[int]) -> None:
        """Record the ids of the last prompt built for a session (search leaves them out)."""
        with self._lock:
            self._visible[(scope, session)] = frozenset(ids)
            self._visible.move_to_end((scope, session))
            while len(self._visible) > VISIBLE_SESSIONS:
                self._visible.popitem(last=False)

    def visible(self, scope: str, session: str) -> frozenset[int]:
        """The ids of the last prompt built for a session by this engine (empty if none)."""
        with self._lock:
            return self._visible.get((scope, session), frozenset())

    # -- messages -------------------------------------------------------------------

    def count(self, message: NewMessage) -> int:
        """Exact size of a message in the storage encoding, chat overhead included."""
        return count_new(self.counter, message)

    def count_many(self, batch: Sequence[NewMessage]) -> list[int]:
        """:meth:`count` of each message; the contents of a large batch counted at once."""
        contents = count_contents(self.counter, [m.content for m in batch])
        return [count_new(self.counter, m, n) for m, n in zip(batch, contents, strict=True)]

    def message(self, scope: str, message_id: int) -> Message:
        """One stored message by id, only if it belongs to ``scope``.

        Raises:
            InvalidQuery: the id is not an integer.
            MessageNotFound: no such message in this scope.

        """
        id_field("scope id", scope, error=InvalidQuery)
        message_id = checked_message_id("message id", message_id)
        found = self.store.get_message(scope, message_id)
        if found is None:
            raise MessageNotFound(f"no message {message_id} in scope {scope!r}")
        return found

    def stored_policy(self, scope: str, session: str) -> Policy:
        """The policy stored with the session, else ``default``."""
        info = self.store.get_session(scope, session)
        stored = info.policy if info is not None else None
        return get_policy(stored) if stored else get_policy("default")

    # -- compaction -----------------------------------------------------------------

    def summarizer(self) -> Summarizer:
        """The model's summarizer (with the offline fallback), or the offline one."""
        return LLMSummarizer(self.llm) if self.llm is not None else OfflineSummarizer()

    def compact(
        self,
        scope: str,
        session: str,
        policy: Policy | None,
        *,
        extra_tokens: int = 0,
        loaded: Loaded | None = None,
    ) -> CompactionResult:
        """One compaction cycle, then the agent-state rules (``policy`` None: the stored one)."""
        started = time.perf_counter()
        active = policy if policy is not None else self.stored_policy(scope, session)
        result = compact_session(
            self.store,
            scope,
            session,
            active,
            self.summarizer(),
            extra_tokens=extra_tokens,
            loaded=loaded,
            keep_flagged_out=not self.config.keeps_flagged(scope),
        )
        compact_stored_agent_state(self.store, scope, session)
        self.compaction_metrics.record(result, time.perf_counter() - started)
        return result

    def compact_within(
        self,
        scope: str,
        session: str,
        policy: Policy,
        *,
        extra_tokens: int = 0,
        loaded: Loaded | None = None,
    ) -> CompactionResult | None:
        """Compact now, waiting at most the configured deadline; None when it ran out.

        A compaction that outlives the deadline goes on in its thread and
        commits by compare-and-set when it finishes; a later call for the same
        session waits for that one instead of starting another.
        """
        result = self._sync.run(
            (scope, session),
            lambda: self.compact(scope, session, policy, extra_tokens=extra_tokens, loaded=loaded),
            self.config.compaction_deadline,
        )
        if result is None:
            log.warning(
                "compaction of %s/%s still running after %.1f s; the turn goes on without it",
                scope,
                session,
                self.config.compaction_deadline,
            )
        return result

    # -- long-term memories ---------------------------------------------------------

    def memories(self, scope: str) -> Memories:
        """The long-term memories of a scope."""
        return Memories(
            self.store,
            scope,
            llm=self.llm,
            cap=self.config.memory_cap,
            budget=self.memory_budget,
            metrics=self.memory_metrics,
            keep_flagged_out=not self.config.keeps_flagged(scope),
            flush_prompts=self.prompts.flush,
        )

    def memories_section(self, scope: str) -> Section | None:
        """The scope's long-term memories as a prompt section, or None when it has none."""
        items: tuple[tuple[int, str], ...] = ()
        if self.memories_text is not None:
            text = self.memories_text(scope)
        else:
            text, shown = shown_memories(self.store, scope, self.memory_metrics, tz=self.tz)
            items = tuple((m.id, m.updated_at.isoformat()) for m in shown)
        if not text or not text.strip():
            return None
        return Section(MEMORIES_SECTION_TITLE, text, SectionSource(MEMORIES_KIND, None, items))

    # -- lifecycle ------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> bool:
        """Stop background work within ``timeout`` seconds; True when all of it finished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.prompts.flush()
        finished = self.scheduler.close(timeout)
        if self._indexer is not None:
            self._indexer.close(wait=False)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self._sync.close(left) and finished
