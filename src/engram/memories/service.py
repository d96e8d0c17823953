"""``Memories``: the long-term memories of one scope, over any ``Store``.

::

    memories = Memories(store, "phoenix", llm=client)       # or Engram.memories("phoenix")
    memories.create("User prefers meetings after 2pm on weekdays.")
    memories.list()                                          # oldest first, at most ``cap``
    memories.context_text()                                  # the prompt block

A scope keeps at most ``cap`` memories. :meth:`Memories.create` past the cap
compacts before it returns: the model decides (see :mod:`.eviction`),
FIFO takes over when it cannot, and every step is written to the scope's
audit trail. Afterwards the count equals the cap.

Concurrency: create + compact of one scope are serialized by a lock per
``(store URL, scope)`` shared by every ``Memories`` in the process, so two
conversations of one scope ending at once leave exactly ``cap`` memories and
one audit entry per compaction step. The ``Store`` has no scope-level
compare-and-set, so across processes the compaction loop re-reads the count
after every step and stops at ``count <= cap``; two processes compacting the
same scope at the same instant may then remove one memory too many, never
leave one too many.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from engram import telemetry
from engram.errors import ConfigError, LLMError, MemoryNotFound, StoreError
from engram.flags import flags
from engram.llm import LLMClient, LLMResult
from engram.llm.client import bounded_client
from engram.memories.block import memory_block
from engram.memories.budget import PURPOSE_COMPACT, MemoryBudget, is_pending
from engram.memories.creation import llm_memory, read_transcript, without_flagged, written_from
from engram.memories.eviction import (
    MAX_DECISION_TOKENS,
    Decision,
    audit_event,
    decision_messages,
    fifo_decision,
    validate_decision,
)
from engram.memories.metrics import MemoryMetrics
from engram.memories.records import (
    DEFAULT_CAP,
    SOURCES_KEY,
    CreatedMemory,
    Outcome,
    check_cap,
    check_content,
    check_metadata,
    find_duplicate,
    memory_receipt,
    merged_metadata,
    purge_receipt,
    refuse_flagged,
    source_ranges,
)
from engram.memories.search import rank
from engram.models import JSON, MemoryRecord, Message
from engram.named_lock import NamedLock, named_lock
from engram.provenance.retention import forget_in_scope
from engram.receipts import Receipt
from engram.store import Store
from engram.store.base import MAX_PAGE

logger = logging.getLogger("engram.memories")

#: Seconds memory work of one conversation may take (30-second timeout).
DEFAULT_TIMEOUT = 30.0
#: Most compaction steps that ask the model in one call; further steps use FIFO.
MAX_LLM_STEPS = 3
#: Most session pages scanned for deferred work after a restart.
MAX_SCAN_PAGES = 20

_T = TypeVar("_T")


def scope_lock(store: Store, scope: str) -> NamedLock:
    """The lock serializing memory writes of one scope of one store.

    Across processes too, on a store that can lock its database (PostgreSQL). Every
    live ``Memories`` object of the scope shares it; it is dropped when none is left.
    """
    return named_lock(store, store.url, f"memories:{scope}")


class Memories:
    """The long-term memories of one scope: create, read, edit, compact, inject, search."""

    def __init__(
        self,
        store: Store,
        scope: str,
        *,
        llm: LLMClient | None = None,
        cap: int = DEFAULT_CAP,
        timeout: float = DEFAULT_TIMEOUT,
        budget: MemoryBudget | None = None,
        metrics: MemoryMetrics | None = None,
        label: str | None = None,
        keep_flagged_out: bool = False,
        flush_prompts: Callable[[], None] | None = None,
    ) -> None:
        """Bind the memories of ``scope``; nothing is read or written yet.

        Args:
            store: Where memories, audit, usage and state live.
            scope: The scope (project, app, user) these memories belong to.
            llm: Model for creation and compaction decisions; None uses the
                extractive memory and FIFO.
            cap: Memories kept at most (1-100; default 10).
            timeout: Seconds one memory operation may spend on the model,
                retry included (30).
            budget: Energy budget shared by the engine (default: unlimited).
            metrics: Counters shared by the engine (default: private ones).
            label: Scope name shown in the prompt (default: the scope id).
            keep_flagged_out: Keep text that reads like instructions to a model
                out of memories: such messages are left out of the conversation a
                memory is written from, and such memories are refused.
            flush_prompts: Writes the prompts recorded and not yet archived, so a
                deleted memory is erased from them too.

        Raises:
            ConfigError: bad cap or timeout.

        """
        if timeout <= 0:
            raise ConfigError(f"memory timeout must be positive, got {timeout}")
        self.store = store
        self.scope = scope
        self.cap = check_cap(cap)
        self.timeout = float(timeout)
        self.llm = bounded_client(llm, self.timeout) if llm is not None else None
        self.budget = budget if budget is not None else MemoryBudget()
        self.metrics = metrics if metrics is not None else MemoryMetrics()
        self.label = label or scope
        self.keep_flagged_out = keep_flagged_out
        self._flush_prompts = flush_prompts or (lambda: None)
        self._lock = scope_lock(store, scope)

    def __repr__(self) -> str:
        return f"Memories(scope={self.scope!r}, cap={self.cap})"

    # -- reading --------------------------------------------------------------------

    def list(self) -> builtins.list[MemoryRecord]:
        """The scope's memories, oldest first."""
        return self.store.list_memories(self.scope)

    def count(self) -> int:
        """How many memories the scope holds."""
        return len(self.store.list_memories(self.scope))

    def get(self, memory_id: int) -> MemoryRecord:
        """One memory of this scope.

        Raises:
            MemoryNotFound: no such memory in this scope (another scope's is "not found" too).

        """
        found = self.store.get_memory(self.scope, memory_id)
        if found is None:
            raise MemoryNotFound(f"no memory {memory_id} in scope {self.scope!r}")
        return found

    def audit(self, limit: int = 100) -> builtins.list[JSON]:
        """The scope's audit trail, newest first."""
        return self.store.list_audit(self.scope, limit=limit)

    def search(self, query: str, *, limit: int = 5) -> builtins.list[MemoryRecord]:
        """Memories matching ``query`` by terms, best first."""
        return [memory for _, memory in self.ranked(query, limit=limit)]

    def ranked(self, query: str, *, limit: int = 5) -> builtins.list[tuple[float, MemoryRecord]]:
        """``(score, memory)`` pairs matching ``query`` by terms, best first."""
        return rank(query, self.list(), limit=limit)

    def context_text(self, *, tz: Any = None) -> str:
        """The memory block for this scope's prompts ("" when there are none).

        Counts one injection when there is something to inject.
        """
        return memory_block(self.store, self.scope, self.metrics, label=self.label, tz=tz)

    # -- writing --------------------------------------------------------------------

    def create(
        self,
        content: str,
        *,
        source_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CreatedMemory:
        """Store a memory; past the cap, compact before returning.

        Returns a :class:`~engram.memories.records.CreatedMemory`: the memory
        now holding the text, with ``status`` and ``evicted`` saying what the
        cap did. A memory that repeats an existing one (same normalized text,
        or word overlap at or above ``DUPLICATE_JACCARD``) is not stored: the
        existing memory is returned ("duplicate"). When compaction merges the
        new memory into another, the merged memory is returned ("merged",
        ``merged_from`` the memory before); when it deletes the new memory
        itself (it added nothing), the deleted record is returned
        ("dropped"). Memories deleted to stay at the cap are in ``evicted``,
        as they were; the audit trail says the same.

        Raises:
            InvalidQuery: empty or too long content, bad metadata.
            StoreError: the store failed twice.

        """
        return self._create(self._unflagged(content), source_session, check_metadata(metadata))

    def update(
        self,
        memory_id: int,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """Change a memory's content and/or metadata (metadata is replaced).

        Raises:
            MemoryNotFound: no such memory in this scope.
            InvalidQuery: empty or too long content, bad metadata.

        """
        text = check_content(content) if content is not None else None
        meta = check_metadata(metadata) if metadata is not None else None
        if content is not None:
            self._unflagged(content)
        traced = telemetry.memory_span("update_memory", self.scope, record=str(memory_id), count=1)
        with traced, self._lock:
            updated = self.store.update_memory(self.scope, memory_id, content=text, metadata=meta)
            if updated is None:
                raise MemoryNotFound(f"no memory {memory_id} in scope {self.scope!r}")
            self.store.add_audit(
                self.scope, {"event": "update", "memory": memory_id, "content": updated.content}
            )
            telemetry.memory_written(traced, updated)
        return updated

    def delete(self, memory_id: int) -> Receipt:
        """Delete one memory of this scope; the receipt says what followed.

        The audit trail keeps what was done but a SHA-256 instead of the text of any
        memory that is gone; recorded prompts that showed it lose that text.

        Raises:
            MemoryNotFound: no such memory in this scope.

        """
        traced = telemetry.memory_span("delete_memory", self.scope, record=str(memory_id), count=1)
        with traced, self._lock:
            texts = {memory.id: memory.content for memory in self.store.list_memories(self.scope)}
            if memory_id not in (live := set(texts)):
                raise MemoryNotFound(f"no memory {memory_id} in scope {self.scope!r}")
            # The text goes from the audit first: a crash in between leaves none behind.
            self.store.redact_audit(self.scope, live - {memory_id})
            if not self.store.delete_memory(self.scope, memory_id):
                raise MemoryNotFound(f"no memory {memory_id} in scope {self.scope!r}")
            receipt = memory_receipt(self.scope, memory_id)
            self._flush_prompts()
            forget_in_scope(self.store, self.scope, [texts[memory_id]])
            self.store.add_audit(
                self.scope, {"event": "delete", "memory": memory_id, "receipt": receipt.to_dict()}
            )
            self.metrics.scope_size(self.scope, self.count())
        return receipt

    def purge(self) -> int:
        """Delete every memory of the scope; how many went (:meth:`clear` gives the receipt)."""
        return self.clear().counts["memories"]

    def clear(self) -> Receipt:
        """Delete every memory of the scope (the purge); the receipt names each one.

        The audit trail stays, without the text of any memory that is gone.
        """
        # A delete_memory span without a record id: every record of the store.
        with telemetry.memory_span("delete_memory", self.scope) as traced, self._lock:
            held = self.store.list_memories(self.scope)
            seen = [memory.id for memory in held]
            self.store.redact_audit(self.scope, ())
            removed = self.store.purge_memories(self.scope)
            self._flush_prompts()
            forget_in_scope(self.store, self.scope, [memory.content for memory in held])
            traced.set({"gen_ai.memory.record.count": removed})
            receipt = purge_receipt(self.scope, seen, removed)
            event = {"event": "purge", "deleted": removed, "receipt": receipt.to_dict()}
            self.store.add_audit(self.scope, event)
            self.metrics.scope_size(self.scope, 0)
        logger.info("purged %d memories of scope %s", removed, self.scope)
        return receipt

    def compact(self) -> builtins.list[Decision]:
        """Bring the scope down to its cap now (e.g. after lowering the cap)."""
        with self._lock:
            return self._compact_locked(None)

    # -- from conversations -----------------------------------------------------------

    def create_from_session(self, session: str, *, reason: str | None = None) -> Outcome:
        """Write the memory of one conversation, deduplicated.

        Over the energy budget the work is deferred (see :mod:`.budget`).
        A model failure or timeout is logged, audited and skipped; it never raises
        for the model's sake.

        Raises:
            StoreError: the store failed twice.

        """
        transcript = read_transcript(self._reader(session))
        if self.keep_flagged_out:
            transcript, flagged = without_flagged(transcript)
            self.metrics.incr("flagged_kept_out", flagged)
        if not transcript:
            return Outcome("skipped", self.scope, session, detail="the conversation is empty")
        meta: JSON = {"related_sessions": [session]}
        if reason:
            meta["end_reason"] = reason
        sources = [m.id for m in transcript]
        if self.llm is None:
            found = written_from(transcript)
            if found is None:
                return Outcome("skipped", self.scope, session, detail="no user statement to keep")
            text, sources = found
            meta["origin"] = "extractive"
        else:
            why = self.budget.exhausted(self.store, self.scope)
            if why is not None:
                self.budget.defer(self.store, self.scope, session, why)
                self.store.add_audit(
                    self.scope, {"event": "deferred", "session": session, "reason": why}
                )
                self.metrics.incr("deferred")
                logger.info(
                    "memory of session %s (scope %s) deferred: %s", session, self.scope, why
                )
                return Outcome("deferred", self.scope, session, detail=why)
            try:
                text, result = llm_memory(self.llm, transcript)
            except LLMError as exc:
                self._charge_failed(session, exc)
                self.metrics.incr("memory_creation_failures")
                self.store.add_audit(
                    self.scope,
                    {"event": "create_failed", "session": session, "error": str(exc)[:500]},
                )
                logger.error("memory creation failed for session %s: %s", session, exc)
                return Outcome("failed", self.scope, session, detail=str(exc))
            self.budget.charge(self.store, self.scope, session, result)
            meta["origin"] = f"llm:{result.model}"
        meta[SOURCES_KEY] = source_ranges(session, sources, [m.id for m in transcript])
        if self.keep_flagged_out and flags(text):
            self.metrics.incr("flagged_kept_out")
            return Outcome("skipped", self.scope, session, detail="it read like instructions")
        record = self._create(text, session, meta)
        if record.status == "duplicate":
            return Outcome("duplicate", self.scope, session, memory=record.record())
        logger.info("created memory for scope %s from session %s", self.scope, session)
        return Outcome("created", self.scope, session, memory=record.record())

    def run_deferred(self, *, scan: bool = False) -> builtins.list[Outcome]:
        """Do the deferred memory work of this scope while the budget allows.

        Args:
            scan: Also look for pending sessions in the store (after a restart
                the in-process queue is empty); reads every session's marker.

        Returns:
            The outcome of each session tried, in order; work still over
            budget stays pending.

        """
        sessions = self.budget.queued(self.scope)
        if scan:
            sessions += [s for s in self._stored_pending() if s not in sessions]
        outcomes = []
        for session in sessions:
            if self.llm is not None and self.budget.exhausted(self.store, self.scope):
                break
            if not is_pending(self.store, self.scope, session):
                self.budget.done(self.store, self.scope, session, "already done")
                continue
            outcome = self.create_from_session(session)
            if outcome.status == "deferred":
                break
            self.budget.done(self.store, self.scope, session, outcome.status)
            self.metrics.incr("deferred_completed")
            outcomes.append(outcome)
        return outcomes

    # -- internals --------------------------------------------------------------------

    def _unflagged(self, content: object) -> str:
        """Checked content, refused when it reads like instructions and the scope says so."""
        text = check_content(content)
        if self.keep_flagged_out and flags(text):
            self.metrics.incr("flagged_kept_out")
            refuse_flagged(text)
        return text

    def _create(self, text: str, session: str | None, meta: JSON) -> CreatedMemory:
        """Add unless repeated, then compact to the cap (traced as ``upsert_memory``)."""
        with telemetry.memory_span("upsert_memory", self.scope, count=1, session=session) as t:
            created = self._create_locked(text, session, meta)
            telemetry.memory_written(t, created, created.status)
        return created

    def _create_locked(self, text: str, session: str | None, meta: JSON) -> CreatedMemory:
        """Add unless repeated, then compact to the cap. Serialized per scope."""
        with self._lock:
            existing = self.store.list_memories(self.scope)
            duplicate = find_duplicate(text, existing)
            if duplicate is not None:
                self.store.add_audit(
                    self.scope,
                    {
                        "event": "duplicate_skipped",
                        "memory": duplicate.id,
                        "session": session,
                        "content": text,
                    },
                )
                self.metrics.incr("memories_duplicate_skipped")
                return CreatedMemory.of(duplicate, "duplicate")
            record = _retry_once(
                lambda: self.store.add_memory(
                    self.scope, text, source_session=session, metadata=meta
                ),
                "store the memory",
            )
            self.store.add_audit(
                self.scope,
                {"event": "create", "memory": record.id, "session": session, "content": text},
            )
            self.metrics.incr("memories_created")
            result = self._room_for(record, {m.id: m for m in [*existing, record]})
            self.metrics.scope_size(self.scope, self.count())
            return result

    def _room_for(self, record: MemoryRecord, before: dict[int, MemoryRecord]) -> CreatedMemory:
        """Compact to the cap after ``record`` was added; say what it did (lock held)."""
        evicted: builtins.list[MemoryRecord] = []
        result, status, merged_from = record, "created", None
        for decision in self._compact_locked(record):
            if decision.action == "edit" and decision.source == "llm":
                merged = self.store.get_memory(self.scope, decision.target_id)
                if merged is not None:
                    result, status = merged, "merged"
                    merged_from = before.get(decision.target_id)
            elif decision.action == "delete" and decision.target_id in before:
                evicted.append(before[decision.target_id])
                if decision.target_id == record.id and status == "created":
                    status = "dropped"
        return CreatedMemory.of(result, status, evicted=evicted, merged_from=merged_from)

    def _compact_locked(self, new: MemoryRecord | None) -> builtins.list[Decision]:
        """Apply one decision at a time until the count is at most the cap (lock held)."""
        applied: builtins.list[Decision] = []
        memories = self.store.list_memories(self.scope)
        steps = 0
        while len(memories) > self.cap:
            steps += 1
            if steps > len(memories) + MAX_LLM_STEPS:
                raise StoreError(f"memory compaction of scope {self.scope!r} makes no progress")
            current_new = new if new is not None and any(m.id == new.id for m in memories) else None
            use_llm = steps <= MAX_LLM_STEPS
            decision = self._decide(memories, current_new, use_llm=use_llm)
            decision = self._apply(decision, memories, current_new)
            after = self.store.list_memories(self.scope)
            self.store.add_audit(
                self.scope,
                audit_event(
                    decision,
                    new_memory=current_new,
                    before=len(memories),
                    after=len(after),
                    cap=self.cap,
                ),
            )
            self.metrics.incr("compactions_llm" if decision.source == "llm" else "compactions_fifo")
            logger.info(
                "compacted memories for scope %s: %s memory %s (%s)",
                self.scope,
                decision.action,
                decision.target_id,
                decision.source + (" fallback" if decision.fallback else ""),
            )
            applied.append(decision)
            memories = after
        return applied

    def _decide(
        self, memories: builtins.list[MemoryRecord], new: MemoryRecord | None, *, use_llm: bool
    ) -> Decision:
        if self.llm is None or not use_llm:
            return fifo_decision(memories)
        why = self.budget.exhausted(self.store, self.scope)
        if why is not None:
            return fifo_decision(memories, error=f"energy budget exhausted: {why}")
        try:
            data, result = self.llm.chat_json(
                decision_messages(memories, new, self.cap),
                purpose=PURPOSE_COMPACT,
                max_tokens=MAX_DECISION_TOKENS,
            )
        except LLMError as exc:
            self._charge_failed(None, exc)
            logger.error("memory compaction decision failed for scope %s: %s", self.scope, exc)
            return fifo_decision(memories, error=str(exc))
        self.budget.charge(self.store, self.scope, None, result)
        try:
            return validate_decision(data, memories, new)
        except LLMError as exc:
            logger.error("invalid memory compaction decision for scope %s: %s", self.scope, exc)
            return fifo_decision(memories, error=f"invalid decision: {exc}")

    def _apply(
        self, decision: Decision, memories: builtins.list[MemoryRecord], new: MemoryRecord | None
    ) -> Decision:
        """Apply ``decision``; if a model decision cannot be applied, apply FIFO instead."""
        try:
            if _retry_once(lambda: self._apply_once(decision, new), "apply the decision"):
                return decision
            error = f"memory {decision.target_id} vanished before the decision was applied"
        except StoreError as exc:
            if decision.source == "fifo":
                raise
            error = f"store failed applying the decision: {exc}"
        logger.error("memory compaction of scope %s: %s", self.scope, error)
        fresh = self.store.list_memories(self.scope) or memories
        fallback = fifo_decision(fresh, error=error)
        _retry_once(lambda: self._apply_once(fallback, None), "apply the FIFO decision")
        return fallback

    def _apply_once(self, decision: Decision, new: MemoryRecord | None) -> bool:
        if decision.action == "delete":
            return self.store.delete_memory(self.scope, decision.target_id)
        assert new is not None and decision.new_content is not None  # validated
        target = self.store.get_memory(self.scope, decision.target_id)
        merged = self.store.update_memory(
            self.scope,
            decision.target_id,
            content=decision.new_content,
            metadata=merged_metadata(target.metadata, new.metadata) if target else None,
        )
        if merged is None:
            return False
        self.store.delete_memory(self.scope, new.id)
        return True

    def _charge_failed(self, session: str | None, exc: LLMError) -> None:
        """Record the usage of a call that answered unusably (it was spent anyway)."""
        result = getattr(exc, "result", None)
        if isinstance(result, LLMResult):
            self.budget.charge(self.store, self.scope, session, result)

    def _reader(self, session: str) -> Callable[[int, int | None], builtins.list[Message]]:
        store, scope = self.store, self.scope

        def read(limit: int, before_id: int | None) -> builtins.list[Message]:
            return store.tail(scope, session, limit=limit, before_id=before_id)

        return read

    def _stored_pending(self) -> builtins.list[str]:
        found = []
        for page in range(MAX_SCAN_PAGES):
            sessions = self.store.list_sessions(self.scope, limit=MAX_PAGE, offset=page * MAX_PAGE)
            found += [s.id for s in sessions if is_pending(self.store, self.scope, s.id)]
            if len(sessions) < MAX_PAGE:
                break
        return found


def _retry_once(action: Callable[[], _T], what: str) -> _T:
    """Run a store write; on a StoreError log it and try once more."""
    try:
        return action()
    except StoreError as exc:
        logger.warning("memory store write failed (%s), retrying once: %s", what, exc)
        return action()
