"""The scheduler protocol and what it is given: see :mod:`engram.background`."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from engram.compaction.cycle import CompactionResult
from engram.memories.records import Outcome
from engram.memories.service import Memories
from engram.policy import Policy


class Handlers(Protocol):
    """What background work does, supplied by the runtime."""

    def compact(
        self, scope: str, session: str, policy: Policy | None, *, extra_tokens: int = 0
    ) -> CompactionResult:
        """One compaction cycle (``policy`` None: the session's stored policy)."""
        ...

    def memories(self, scope: str) -> Memories:
        """The long-term memories of a scope."""
        ...


class Scheduler(Protocol):
    """Where a session hands work it does not wait for."""

    def compact_later(
        self, scope: str, session: str, policy: Policy, *, extra_tokens: int = 0
    ) -> bool:
        """Schedule one compaction of the session (deduplicated); True when one is pending."""
        ...

    def end_session(
        self, scope: str, session: str, reason: str, *, wait: bool = False
    ) -> Future[Outcome]:
        """Record the end now; write the scope's memory of it in the background."""
        ...

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no work this scheduler accepted is queued or running; False on timeout."""
        ...

    def close(self, timeout: float | None = None) -> bool:
        """Stop taking work and let running work finish for up to ``timeout`` seconds.

        Returns False when work was still running at the deadline (it is
        abandoned: compactions commit by compare-and-set, so nothing is half
        written).
        """
        ...


@runtime_checkable
class SupportsJobQueue(Protocol):
    """A store that offers a job queue shared by every process using it."""

    def job_queue(self, worker_id: str) -> object:
        """A queue handle whose claims are made in the name of ``worker_id``."""
        ...
