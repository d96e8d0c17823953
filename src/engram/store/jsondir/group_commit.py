"""Group commit: threads that write at the same moment share one commit (and one fsync).

A thread hands its request to :meth:`GroupCommit.submit`. If no commit is under
way it becomes the *leader*: it takes every request queued so far (its own
first) and commits them together with the function given to the constructor.
Threads arriving meanwhile queue and wait; when the leader is done it wakes
them with their outcome, and hands the lead to the first request queued since,
which commits the next group. Each thread has at most one request in flight,
so a thread's writes keep their order; requests are committed in arrival order.

Nobody waits longer than one commit in progress plus its own group's commit,
and a leader never commits more than one group: its own call returns as soon
as its group is durable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

P = TypeVar("P")
R = TypeVar("R")


class Request(Generic[P, R]):
    """One queued write: its payload, then its result or error."""

    __slots__ = ("done", "error", "lead", "payload", "result")

    def __init__(self, payload: P) -> None:
        self.payload = payload
        self.result: R | None = None
        self.error: BaseException | None = None
        self.lead = False
        self.done = threading.Event()

    def outcome(self) -> R:
        """The result, or raise the error the commit recorded."""
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class GroupCommit(Generic[P, R]):
    """Queue of requests committed in groups by ``commit(requests)``.

    ``commit`` must set ``result`` or ``error`` on every request it is given;
    an exception escaping it becomes the error of every request left without one.
    """

    def __init__(self, commit: Callable[[list[Request[P, R]]], None]) -> None:
        self._commit = commit
        self._lock = threading.Lock()
        self._queue: list[Request[P, R]] = []
        self._busy = False

    def submit(self, payload: P) -> R:
        """Commit ``payload`` (with whatever else is queued) and return its result."""
        request: Request[P, R] = Request(payload)
        with self._lock:
            self._queue.append(request)
            lead = not self._busy
            self._busy = True
        if not lead:
            request.done.wait()
            if not request.lead:
                return request.outcome()
        self._lead()
        return request.outcome()

    def run_alone(self, payload: P) -> R:
        """Commit ``payload`` at once in this thread, outside any group.

        For a caller that already holds what ``commit`` takes (a re-entrant
        write lock), which queuing behind another leader would deadlock.
        """
        request: Request[P, R] = Request(payload)
        self._run([request])
        return request.outcome()

    def _lead(self) -> None:
        with self._lock:
            group, self._queue = self._queue, []
        try:
            self._run(group)
        finally:
            with self._lock:
                successor = self._queue[0] if self._queue else None
                if successor is None:
                    self._busy = False
                else:
                    successor.lead = True
            for request in group:
                request.done.set()
            if successor is not None:
                successor.done.set()

    def _run(self, group: list[Request[P, R]]) -> None:
        try:
            self._commit(group)
        except BaseException as exc:  # every request must learn its fate
            for request in group:
                if request.result is None and request.error is None:
                    request.error = exc
            if not isinstance(exc, Exception):
                raise


__all__: list[Any] = ["GroupCommit", "Request"]
