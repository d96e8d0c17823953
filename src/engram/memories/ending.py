"""Ending a conversation: mark it ended, then remember it off the caller's path (seed 003).

:func:`end_session` records the end at once (session state of kind
:data:`LIFECYCLE_KIND`: ``{"ended_at", "reason", "last_message_id", "ends"}``,
saved by compare-and-set) and hands the memory creation to a
:class:`MemoryWorker`, a small bounded thread pool, so the caller does not
wait. The job has the memory timeout (30 seconds by default) for the model,
retry included; on any failure it logs, audits and skips: the session has
ended all the same. A session ended again without new messages is not
remembered twice.

When more than :data:`MAX_QUEUED_JOBS` jobs wait, further ends are deferred
(persisted as pending, done by ``Memories.run_deferred``), not dropped.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

from engram.errors import ConfigError, InvalidQuery, SessionNotFound, StoreError
from engram.memories.records import Outcome
from engram.memories.service import Memories
from engram.models import JSON

logger = logging.getLogger("engram.memories")

#: Session state kind recording that (and why) a conversation ended.
LIFECYCLE_KIND = "lifecycle"
#: Threads of the default worker: memory work is background, low priority work.
DEFAULT_WORKERS = 2
#: Jobs waiting at most; beyond it ends are deferred instead of queued in memory.
MAX_QUEUED_JOBS = 1000
#: Longest end reason kept, in characters.
MAX_REASON_CHARS = 200
#: Compare-and-set attempts when recording the end.
CAS_ATTEMPTS = 5


class MemoryWorker:
    """A small bounded pool running memory creation in the background. Close it when done."""

    def __init__(self, max_workers: int = DEFAULT_WORKERS, *, max_queued: int = MAX_QUEUED_JOBS):
        """Start nothing yet; threads are created on the first job.

        Raises:
            ConfigError: ``max_workers`` or ``max_queued`` is below 1.

        """
        if max_workers < 1 or max_queued < 1:
            raise ConfigError(
                f"memory worker needs max_workers >= 1 and max_queued >= 1,"
                f" got {max_workers} and {max_queued}"
            )
        self.max_queued = max_queued
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="engram-memory")
        self._lock = threading.Lock()
        self._waiting = 0
        self._closed = False

    def submit(self, memories: Memories, session: str, reason: str) -> Future[Outcome]:
        """Run the memory creation of ``session`` in the background; never raises for it."""
        with self._lock:
            busy = self._closed or self._waiting >= self.max_queued
            if not busy:
                self._waiting += 1
        if busy:
            return _done(_defer(memories, session, "memory worker is closed or full"))
        try:
            return self._pool.submit(self._run, memories, session, reason)
        except RuntimeError:  # shut down between the check and the submit
            with self._lock:
                self._waiting -= 1
            return _done(_defer(memories, session, "memory worker is closed"))

    def _run(self, memories: Memories, session: str, reason: str) -> Outcome:
        with self._lock:
            self._waiting -= 1
        return remember(memories, session, reason)

    def close(self, *, wait: bool = True) -> None:
        """Stop taking jobs; with ``wait``, finish the queued ones first. Safe to call twice."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait)

    def __enter__(self) -> MemoryWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def end_session(
    memories: Memories,
    session: str,
    reason: str = "ended",
    *,
    worker: MemoryWorker | None = None,
    wait: bool = False,
) -> Future[Outcome]:
    """End ``session`` of ``memories.scope`` and remember it in the background.

    Args:
        memories: The memories of the session's scope.
        session: The session id.
        reason: Why it ended ("user closed", "timeout"...), kept with the end.
        worker: The pool that does the work; None runs it in the caller's thread.
        wait: Return only once the memory work is done (tests, CLI).

    Returns:
        A future of the :class:`~engram.memories.records.Outcome`; it never
        raises for a memory failure.

    Raises:
        SessionNotFound: the session has no messages in this scope.
        InvalidQuery: the reason is not text.

    """
    if not isinstance(reason, str):
        raise InvalidQuery(f"end reason must be text, got {type(reason).__name__}")
    store, scope = memories.store, memories.scope
    if store.get_session(scope, session) is None:
        raise SessionNotFound(f"no session {session!r} in scope {scope!r}")
    fresh = mark_ended(memories, session, reason)
    if not fresh:
        outcome = Outcome("skipped", scope, session, detail="no new messages since the last end")
        return _done(outcome)
    if worker is None:
        return _done(remember(memories, session, reason))
    future = worker.submit(memories, session, reason)
    if wait:
        future.result()
    return future


def mark_ended(memories: Memories, session: str, reason: str) -> bool:
    """Record the end in the lifecycle state; True when there is something new to remember."""
    store, scope = memories.store, memories.scope
    newest = store.tail(scope, session, limit=1)
    last_id = newest[-1].id if newest else None
    for _ in range(CAS_ATTEMPTS):
        current = store.load_state(scope, session, LIFECYCLE_KIND)
        data: JSON = dict(current.data) if current is not None else {}
        fresh = last_id is not None and data.get("last_message_id") != last_id
        data.update(
            ended_at=datetime.now(UTC).isoformat(timespec="seconds"),
            reason=reason[:MAX_REASON_CHARS],
            last_message_id=last_id,
            ends=int(data.get("ends", 0)) + 1,
        )
        version = current.version if current is not None else 0
        if store.save_state(scope, session, LIFECYCLE_KIND, data, expected_version=version):
            return fresh
    # Other writers keep ending it at the same time: one of them remembers it.
    return False


def remember(memories: Memories, session: str, reason: str) -> Outcome:
    """Create the memory of an ended session; any failure is logged and skipped."""
    try:
        return memories.create_from_session(session, reason=reason)
    except Exception as exc:
        # A memory is a quality-of-life feature (seed 003): never crash the caller.
        logger.exception("memory creation failed for session %s of %s", session, memories.scope)
        memories.metrics.incr("memory_creation_failures")
        try:
            memories.store.add_audit(
                memories.scope,
                {"event": "create_failed", "session": session, "error": str(exc)[:500]},
            )
        except StoreError:
            logger.exception("could not audit the failed memory creation of %s", session)
        return Outcome("failed", memories.scope, session, detail=str(exc))


def _defer(memories: Memories, session: str, why: str) -> Outcome:
    try:
        memories.budget.defer(memories.store, memories.scope, session, why)
    except StoreError as exc:
        logger.error("could not defer the memory of session %s: %s", session, exc)
        return Outcome("failed", memories.scope, session, detail=str(exc))
    memories.metrics.incr("deferred")
    return Outcome("deferred", memories.scope, session, detail=why)


def _done(outcome: Outcome) -> Future[Outcome]:
    future: Future[Outcome] = Future()
    future.set_result(outcome)
    return future
