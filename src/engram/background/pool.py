"""A small bounded worker that runs keyed work off the request path.

:class:`KeyedPool` runs the background work of this process that is keyed by
session: compactions (:class:`BackgroundCompactor`, for the in-process
scheduler) and embeddings of new messages (the runtime's). A turn never waits
for it: the session hands the work here and builds the prompt now. Work is
de-duplicated per key (one key per session): a key is at most once in the
queue, and a request that arrives while that key runs marks it to run once
more afterwards (new messages may have arrived), so one session never has two
tasks of one pool queued or running at the same time in this process. Other
processes are kept honest by the store's compare-and-set.

Errors are logged, never raised into a caller: the prompt has already been
built without the new state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

#: Worker threads. Compactions are mostly waiting on a model; two let a slow
#: session not hold up every other one, while keeping the load bounded.
DEFAULT_WORKERS = 2
#: Most distinct sessions waiting at once; more requests are dropped (logged),
#: the next turn of those sessions asks again.
MAX_PENDING = 1000

Task = Callable[[], object]


class KeyedPool:
    """Runs at most one task per key at a time, with a bounded queue."""

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        *,
        max_pending: int = MAX_PENDING,
        kind: str = "compaction",
        thread_name_prefix: str = "engram-compact",
    ):
        """Create the worker; threads start on the first submitted task.

        ``kind`` names the work in the logs ("compaction", "embedding").
        """
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=thread_name_prefix
        )
        self._max_pending = max_pending
        self._kind = kind
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queued: dict[Hashable, Task] = {}  # key -> latest task, not started yet
        self._running: set[Hashable] = set()
        self._again: dict[Hashable, Task] = {}  # asked for while running
        self._closed = False
        self.completed = 0
        self.failed = 0

    def submit(self, key: Hashable, task: Task) -> bool:
        """Schedule ``task`` for ``key`` unless one is already waiting; True if accepted.

        A request for a key that is running is remembered and run once after it.
        """
        with self._lock:
            if self._closed:
                return False
            if key in self._queued:
                self._queued[key] = task  # the newest arguments win; still one task
                return True
            if key in self._running:
                self._again[key] = task
                return True
            if len(self._queued) + len(self._running) >= self._max_pending:
                log.warning("background %s queue full; %r not scheduled", self._kind, key)
                return False
            self._queued[key] = task
        self._executor.submit(self._run, key)
        return True

    def pending(self, key: Hashable) -> bool:
        """Tell whether work for ``key`` is queued or running."""
        with self._lock:
            return key in self._queued or key in self._running

    def _run(self, key: Hashable) -> None:
        while True:
            with self._lock:
                task = self._queued.pop(key, None)
                if task is None or self._closed:
                    self._idle.notify_all()
                    return
                self._running.add(key)
            try:
                task()
                ok = True
            except Exception:  # a background failure must not kill the worker
                log.exception("background %s of %r failed", self._kind, key)
                ok = False
            with self._lock:
                self._running.discard(key)
                if ok:
                    self.completed += 1
                else:
                    self.failed += 1
                again = self._again.pop(key, None)
                if again is None or self._closed:
                    self._idle.notify_all()
                    return
                self._queued[key] = again  # loop: run once more on this thread

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or running; False on timeout."""
        with self._lock:
            return self._idle.wait_for(
                lambda: not self._queued and not self._running, timeout=timeout
            )

    def close(self, *, wait: bool = True, timeout: float | None = None) -> bool:
        """Drop queued work, stop the threads; True when nothing is left running.

        With ``wait``, running tasks get up to ``timeout`` seconds (None: as long
        as they take) to finish; a task still running then is abandoned to its
        thread (a compaction commits by compare-and-set, so it is never half written).
        """
        with self._lock:
            self._closed = True
            self._queued.clear()
            self._again.clear()
            self._idle.notify_all()
            idle = self._idle.wait_for(lambda: not self._running, timeout=timeout if wait else 0)
        self._executor.shutdown(wait=False, cancel_futures=True)
        return idle


class BackgroundCompactor(KeyedPool):
    """The pool of background compactions: one per session queued or running."""

    def __init__(self, workers: int = DEFAULT_WORKERS, *, max_pending: int = MAX_PENDING):
        """Create the worker; threads start on the first submitted compaction."""
        super().__init__(workers, max_pending=max_pending)


def embedding_pool() -> KeyedPool:
    """The pool that embeds new messages: one thread, one task per session."""
    return KeyedPool(1, kind="embedding", thread_name_prefix="engram-embed")
