"""Background work: compactions and end-of-session memories, off the caller's path.

One :class:`Scheduler` protocol, two implementations, chosen by what the store
can do (never by its type name):

* :class:`~engram.background.local.LocalScheduler`: small bounded thread pools
  in this process (SQLite, jsondir, memory stores);
* :class:`~engram.background.queue.QueueScheduler`: the shared job queue of a
  store that offers one (PostgreSQL), so any server sharing the database may
  run any job.

A scheduler never calls up into the ``Engram`` facade: it is given
:class:`Handlers` (the runtime) that do the work.

Every thread pool of Engram lives in this package: besides the schedulers',
:class:`~engram.background.pool.KeyedPool` embeds new messages (one task per
session) and :class:`~engram.background.deadline.DeadlinePool` runs the
compactions a turn waits for, up to the configured deadline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engram.background.base import Handlers, Scheduler, SupportsJobQueue
from engram.background.local import LocalScheduler

if TYPE_CHECKING:
    from engram.background.queue import QueueScheduler

__all__ = [
    "Handlers",
    "LocalScheduler",
    "QueueScheduler",
    "Scheduler",
    "SupportsJobQueue",
    "make_scheduler",
]


def __getattr__(name: str) -> Any:
    # The queue scheduler (sockets, uuids) is loaded when a store offers a queue.
    if name == "QueueScheduler":
        from engram.background.queue import QueueScheduler

        return QueueScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_scheduler(store: object, handlers: Handlers, *, run_jobs: bool = True) -> Scheduler:
    """The shared-queue scheduler when the store offers a queue, else the in-process one."""
    if isinstance(store, SupportsJobQueue):
        from engram.background.queue import QueueScheduler

        return QueueScheduler(store, handlers, run_jobs=run_jobs)
    return LocalScheduler(handlers)
