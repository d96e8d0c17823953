"""Background work in this process: two small bounded thread pools.

* compactions go to a :class:`~engram.background.pool.BackgroundCompactor`
  (at most one per session queued or running; a request made while one runs
  makes it run once more afterwards);
* end-of-session memories go to a :class:`MemoryWorker`; when more than
  :data:`MAX_QUEUED_JOBS` wait, or the worker is closed, an end is deferred
  (persisted, done by ``Memories.run_deferred``), never dropped.

Errors are logged, never raised into a caller: the prompt was built without
the new state, and the session has ended all the same.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from engram.background.base import Handlers
from engram.background.pool import BackgroundCompactor
from engram.errors import ConfigError
from engram.memories.ending import begin_end, defer, remember
from engram.memories.records import Outcome
from engram.memories.service import Memories
from engram.policy import Policy

__all__ = ["DEFAULT_WORKERS", "MAX_QUEUED_JOBS", "LocalScheduler", "MemoryWorker", "end_session"]

#: Threads of the memory worker: memory work is background, low priority work.
DEFAULT_WORKERS = 2
#: Memory jobs waiting at most; beyond it ends are deferred instead of queued in memory.
MAX_QUEUED_JOBS = 1000


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
        self._idle = threading.Condition(self._lock)
        self._waiting = 0
        self._running = 0
        self._closed = False

    def submit(self, memories: Memories, session: str, reason: str) -> Future[Outcome]:
        """Run the memory creation of ``session`` in the background; never raises for it."""
        with self._lock:
            busy = self._closed or self._waiting >= self.max_queued
            if not busy:
                self._waiting += 1
        if busy:
            return done(defer(memories, session, "memory worker is closed or full"))
        try:
            return self._pool.submit(self._run, memories, session, reason)
        except RuntimeError:  # shut down between the check and the submit
            with self._lock:
                self._waiting -= 1
                self._idle.notify_all()
            return done(defer(memories, session, "memory worker is closed"))

    def _run(self, memories: Memories, session: str, reason: str) -> Outcome:
        with self._lock:
            self._waiting -= 1
            self._running += 1
        try:
            return remember(memories, session, reason)
        finally:
            with self._lock:
                self._running -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no job waits or runs; False on timeout."""
        with self._lock:
            return self._idle.wait_for(
                lambda: not self._waiting and not self._running, timeout=timeout
            )

    def close(self, *, wait: bool = True, timeout: float | None = None) -> bool:
        """Stop taking jobs; with ``wait``, let queued ones finish for up to ``timeout`` s.

        True when nothing is left waiting or running. Safe to call twice.
        """
        with self._lock:
            self._closed = True
        idle = self.wait_idle(timeout if wait else 0)
        self._pool.shutdown(wait=False, cancel_futures=not idle)
        return idle

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
        InvalidQuery: the reason is not text.

    """
    skipped = begin_end(memories, session, reason)
    if skipped is not None:
        return done(skipped)
    if worker is None:
        return done(remember(memories, session, reason))
    future = worker.submit(memories, session, reason)
    if wait:
        future.result()
    return future


class LocalScheduler:
    """The in-process :class:`~engram.background.base.Scheduler`."""

    def __init__(self, handlers: Handlers) -> None:
        """Create the pools; their threads start with the first job."""
        self._handlers = handlers
        self.compactions = BackgroundCompactor()
        self.memory_worker = MemoryWorker()

    def compact_later(
        self, scope: str, session: str, policy: Policy, *, extra_tokens: int = 0
    ) -> bool:
        """Queue one compaction of the session (see :class:`BackgroundCompactor`)."""
        handlers = self._handlers

        def run() -> object:
            return handlers.compact(scope, session, policy, extra_tokens=extra_tokens)

        return self.compactions.submit((scope, session), run)

    def end_session(
        self, scope: str, session: str, reason: str, *, wait: bool = False
    ) -> Future[Outcome]:
        """Record the end now; the memory is written by the memory worker."""
        memories = self._handlers.memories(scope)
        return end_session(memories, session, reason, worker=self.memory_worker, wait=wait)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until both pools are idle; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.compactions.wait_idle(timeout):
            return False
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.memory_worker.wait_idle(left)

    def close(self, timeout: float | None = None) -> bool:
        """Drop queued compactions, finish queued memories; give both ``timeout`` s in all."""
        deadline = None if timeout is None else time.monotonic() + timeout
        compactions_done = self.compactions.close(timeout=timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        memories_done = self.memory_worker.close(timeout=left)
        return compactions_done and memories_done


def done(outcome: Outcome) -> Future[Outcome]:
    """A future that already holds ``outcome``."""
    future: Future[Outcome] = Future()
    future.set_result(outcome)
    return future
