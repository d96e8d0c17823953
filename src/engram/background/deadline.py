"""Work a caller waits for, up to a deadline, that goes on in the background past it.

A policy with ``sync_compaction`` compacts before the prompt is built, but a
turn never waits longer than the configured deadline: :class:`DeadlinePool`
runs the compaction in one of its threads and gives up waiting when the
deadline passes; the compaction goes on and commits by compare-and-set when
it finishes. A later call for the same key waits for that run instead of
starting another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Generic, TypeVar

__all__ = ["DEFAULT_WORKERS", "DeadlinePool"]

#: Threads that run synchronous compactions under their deadline.
DEFAULT_WORKERS = 4

R = TypeVar("R")


class DeadlinePool(Generic[R]):
    """Runs one task per key at a time; callers wait for its result up to a deadline."""

    def __init__(
        self, workers: int = DEFAULT_WORKERS, *, thread_name_prefix: str = "engram-sync-compact"
    ) -> None:
        """Create the pool; threads start on the first task."""
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix=thread_name_prefix)
        self._lock = threading.Lock()
        self._inflight: dict[Hashable, Future[R]] = {}

    def run(self, key: Hashable, task: Callable[[], R], timeout: float | None) -> R | None:
        """The result of ``task`` (or of the run of ``key`` already going), or None at the deadline.

        A task still running at the deadline goes on in its thread. Its
        exception, if it raises in time, is raised here.
        """
        with self._lock:
            future = self._inflight.get(key)
            started = future is None
            if future is None:
                future = self._inflight[key] = self._executor.submit(task)
        if started:
            # Outside the lock: a future already done runs its callback at once, in this thread.
            future.add_done_callback(lambda done: self._forget(key, done))
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            return None

    def _forget(self, key: Hashable, done: Future[R]) -> None:
        with self._lock:
            if self._inflight.get(key) is done:
                del self._inflight[key]

    def close(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for running tasks, then stop; True when all finished.

        Queued tasks are cancelled; a task still running is abandoned to its thread.
        """
        with self._lock:
            running = list(self._inflight.values())
        _done, still_running = wait(running, timeout=timeout)
        self._executor.shutdown(wait=False, cancel_futures=True)
        return not still_running
