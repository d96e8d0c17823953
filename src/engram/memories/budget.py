"""The "energy": what memory work costs, and a budget that defers it.

Every LLM call of memory work is recorded with ``Store.record_usage`` under
the purposes :data:`PURPOSE_CREATE` and :data:`PURPOSE_COMPACT`, on the scope
(and the session whose end caused it), with its tokens and cost.

A :class:`MemoryBudget` caps the tokens memory work may spend per scope: over
a sliding hour (counted in this process) and/or in total (read from the
store's usage totals, so it survives restarts). When a scope is over budget:

* creating a memory from an ended session is **deferred, not dropped**: the
  session gets a state document of kind :data:`PENDING_KIND` (``{"status":
  "pending", ...}``), an audit event is written, the session joins an
  in-process queue, and :meth:`Memories.run_deferred` does the work once the
  budget allows (it also finds pending sessions after a restart by scanning
  the scope's sessions);
* compaction past the cap does not wait (the cap is a hard limit): it uses
  the FIFO rule, which costs nothing, and the audit says why.

Work that costs no tokens (no LLM configured: the extractive memory, FIFO)
is never deferred.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

from engram.errors import ConfigError
from engram.llm import LLMResult
from engram.models import JSON
from engram.store import Store

#: Usage purpose of a memory-creation call.
PURPOSE_CREATE = "memory.create"
#: Usage purpose of a compaction-decision call.
PURPOSE_COMPACT = "memory.compact"
#: Session state kind that marks a deferred memory creation.
PENDING_KIND = "memory_pending"
#: Length of the sliding window of ``max_tokens_per_hour``, in seconds.
WINDOW_SECONDS = 3600.0
#: Compare-and-set attempts when writing a pending marker before giving up.
CAS_ATTEMPTS = 5


class MemoryBudget:
    """Token caps for memory work, per scope. Thread-safe; share one per Engram."""

    def __init__(
        self,
        *,
        max_tokens_per_hour: int | None = None,
        max_tokens_total: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Configure the caps (None: no cap).

        Args:
            max_tokens_per_hour: Input + output tokens memory work of one
                scope may spend in any sliding hour (this process).
            max_tokens_total: Input + output tokens memory work of one scope
                may ever spend, as recorded in the store.
            clock: Seconds, monotonic; tests pass a fake one to move time.

        Raises:
            ConfigError: a cap is not a positive integer.

        """
        for label, value in (
            ("max_tokens_per_hour", max_tokens_per_hour),
            ("max_tokens_total", max_tokens_total),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{label} must be a positive integer or None, got {value!r}")
        self.max_tokens_per_hour = max_tokens_per_hour
        self.max_tokens_total = max_tokens_total
        self.clock = clock
        self._lock = threading.Lock()
        self._spent: dict[str, deque[tuple[float, int]]] = {}
        self._pending: dict[str, dict[str, None]] = {}

    @property
    def unlimited(self) -> bool:
        """True when no cap is set."""
        return self.max_tokens_per_hour is None and self.max_tokens_total is None

    # -- spending -----------------------------------------------------------------

    def spent_this_hour(self, scope: str) -> int:
        """Tokens memory work of ``scope`` spent in the last hour (this process)."""
        now = self.clock()
        with self._lock:
            window = self._spent.get(scope)
            if not window:
                return 0
            while window and window[0][0] <= now - WINDOW_SECONDS:
                window.popleft()
            return sum(tokens for _, tokens in window)

    def exhausted(self, store: Store, scope: str) -> str | None:
        """Why memory work of ``scope`` must wait now, or None when it may run."""
        if self.max_tokens_per_hour is not None:
            spent = self.spent_this_hour(scope)
            if spent >= self.max_tokens_per_hour:
                return f"{spent} of {self.max_tokens_per_hour} memory tokens this hour spent"
        if self.max_tokens_total is not None:
            spent = memory_tokens(store, scope)
            if spent >= self.max_tokens_total:
                return f"{spent} of {self.max_tokens_total} memory tokens in total spent"
        return None

    def charge(self, store: Store, scope: str, session: str | None, result: LLMResult) -> None:
        """Record one LLM call of memory work: in the store, and against the hourly cap."""
        store.record_usage(scope, session, result.usage_record())
        with self._lock:
            self._spent.setdefault(scope, deque()).append(
                (self.clock(), result.input_tokens + result.output_tokens)
            )

    # -- the deferred queue ------------------------------------------------------------

    def defer(self, store: Store, scope: str, session: str, reason: str) -> None:
        """Queue the memory creation of ``session`` and persist the marker."""
        _save_pending(
            store,
            scope,
            session,
            {"status": "pending", "reason": reason, "deferred_at": _now_iso()},
        )
        with self._lock:
            self._pending.setdefault(scope, {})[session] = None

    def queued(self, scope: str) -> list[str]:
        """Sessions of ``scope`` queued in this process, oldest first."""
        with self._lock:
            return list(self._pending.get(scope, {}))

    def done(self, store: Store, scope: str, session: str, outcome: str) -> None:
        """Mark a deferred creation as done (whatever its outcome) and unqueue it."""
        _save_pending(
            store, scope, session, {"status": "done", "outcome": outcome, "done_at": _now_iso()}
        )
        with self._lock:
            self._pending.get(scope, {}).pop(session, None)


def memory_tokens(store: Store, scope: str) -> int:
    """Input + output tokens ever recorded for memory work of ``scope``."""
    by_purpose = store.usage_totals(scope).get("by_purpose", {})
    total = 0
    for purpose in (PURPOSE_CREATE, PURPOSE_COMPACT):
        row = by_purpose.get(purpose) or {}
        total += int(row.get("input_tokens", 0)) + int(row.get("output_tokens", 0))
    return total


def is_pending(store: Store, scope: str, session: str) -> bool:
    """True when the session's memory creation was deferred and is not done yet."""
    record = store.load_state(scope, session, PENDING_KIND)
    return record is not None and record.data.get("status") == "pending"


def _save_pending(store: Store, scope: str, session: str, data: JSON) -> None:
    for _ in range(CAS_ATTEMPTS):
        current = store.load_state(scope, session, PENDING_KIND)
        version = current.version if current is not None else 0
        if store.save_state(scope, session, PENDING_KIND, data, expected_version=version):
            return
    # Another writer keeps winning: its marker is as good as ours.


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
