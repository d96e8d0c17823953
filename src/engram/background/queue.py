"""Background work through the shared PostgreSQL job queue, so any server may run it.

On a store that offers a job queue (PostgreSQL), an ``Engram`` does not keep
its background work (compaction, end-of-session memories) in process memory:
it enqueues a job in the store's ``jobs`` table and one small thread per
``Engram`` (a :class:`QueueScheduler`) claims ready jobs of any server with
``FOR UPDATE SKIP LOCKED``, runs them and marks them done or failed.

* **Compaction**: ``Session.compact_later`` enqueues a ``compaction`` job
  (payload: the policy as a dict and ``extra_tokens``) with the dedupe key
  ``compact:<scope>/<session>`` (ids percent-encoded), so a session has at
  most one compaction pending or running across all servers. A request made
  while one runs is absorbed by it; the next turn asks again if still due.
* **Memories**: ``Session.end`` records the end at once (the ``lifecycle``
  state, as on SQLite) and enqueues a ``memory`` job (payload: the reason,
  dedupe key ``memory:<scope>/<session>``). It returns a future resolved when
  the job completes in *any* worker (this process's, or another server's,
  seen by polling the job's status).
* **Leases**: a claim holds a job for :data:`JOB_LEASE` (60 s; compaction and
  the 30-second memory limit fit in it). A worker that dies leaves its job
  ``running``; once the lease passes another worker claims it again. A job
  that outlives its lease may run twice: harmless, since compaction commits by
  compare-and-set and memory creation is deduplicated.
* **Threads**: with ``run_jobs=True`` (the default) the worker thread starts
  when the ``Engram`` opens, so a server that never enqueues still helps. With
  ``run_jobs=False`` (web servers that leave jobs to dedicated workers) jobs
  are only enqueued; a thread starts on the first enqueue just to resolve
  ``Session.end`` futures. ``close`` lets a running job finish, claims no
  new one, and joins the thread; jobs still queued stay in the table for the
  other workers, and futures still unresolved are cancelled.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import Future, InvalidStateError
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from engram.background.base import Handlers, SupportsJobQueue
from engram.background.local import done
from engram.errors import ConfigError, EngramError, InvalidQuery, NotFound
from engram.memories.ending import begin_end, remember
from engram.memories.records import Outcome
from engram.policy import Policy, get_policy

if TYPE_CHECKING:
    # Annotations only: the queue module needs psycopg, an optional extra; a
    # store that offers a queue has already imported it.
    from engram.store.postgres.jobs import Job, JobQueue

log = logging.getLogger(__name__)

#: Job kind of a session compaction.
COMPACTION = "compaction"
#: Job kind of an end-of-session memory.
MEMORY = "memory"
#: The kinds an Engram worker claims.
KINDS = [COMPACTION, MEMORY]
#: How long a claimed job stays reserved for its worker (then another may claim it).
JOB_LEASE = timedelta(seconds=60)
#: Shortest wait between two claims (after work, or when this Engram enqueues).
POLL_MIN = 0.1
#: Longest wait between two claims when the queue stays empty (doubling back-off).
POLL_MAX = 1.0
#: How often ``wait_idle`` re-reads the status of this Engram's jobs.
WATCH_POLL = 0.05
#: Statuses of a job that is not finished.
LIVE = ("pending", "running")


def dedupe_key(prefix: str, scope: str, session: str) -> str:
    """``<prefix>:<scope>/<session>``, ids percent-encoded so distinct pairs never collide."""
    return f"{prefix}:{quote(scope, safe='')}/{quote(session, safe='')}"


class QueueScheduler:
    """One Engram's side of the shared queue: enqueue, run claimed jobs, watch its own jobs."""

    def __init__(
        self,
        store: SupportsJobQueue,
        handlers: Handlers,
        *,
        run_jobs: bool = True,
        lease: timedelta = JOB_LEASE,
    ) -> None:
        """Start the worker thread at once when ``run_jobs`` (else on the first enqueue)."""
        # host:pid plus a random part: two Engrams of one process are two workers.
        worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.queue: JobQueue = store.job_queue(worker_id)  # type: ignore[assignment]
        self.run_jobs = run_jobs
        self.lease = lease
        self.completed = 0
        self.failed = 0
        self._handlers = handlers
        self._lock = threading.Lock()
        # job id -> (future or None, scope, session): jobs this Engram enqueued, not finished.
        self._watched: dict[int, tuple[Future[Outcome] | None, str, str]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        if run_jobs:
            self._ensure_thread()

    @property
    def worker_id(self) -> str:
        """The name this worker puts in the rows it claims."""
        return self.queue.worker_id

    # -- enqueueing ------------------------------------------------------------------

    def compact_later(
        self, scope: str, session: str, policy: Policy, *, extra_tokens: int = 0
    ) -> bool:
        """Queue a compaction of the session (once while one is live); True when one is."""
        if self._closed:
            return False
        job_id = self.queue.enqueue(
            COMPACTION,
            scope=scope,
            session=session,
            payload={"policy": policy.to_dict(), "extra_tokens": int(extra_tokens)},
            dedupe_key=dedupe_key("compact", scope, session),
        )
        self._watch(job_id, None, scope, session)
        return True

    def end_session(
        self, scope: str, session: str, reason: str, *, wait: bool = False
    ) -> Future[Outcome]:
        """Record the end now (as the local scheduler does); queue the memory writing.

        The future is resolved when the job completes in any worker.

        Raises:
            InvalidQuery: the reason is not text.
            ConfigError: the Engram is closed.

        """
        if self._closed:
            raise ConfigError("this Engram is closed")
        skipped = begin_end(self._handlers.memories(scope), session, reason)
        if skipped is not None:
            return done(skipped)
        job_id = self.queue.enqueue(
            MEMORY,
            scope=scope,
            session=session,
            payload={"reason": reason},
            dedupe_key=dedupe_key("memory", scope, session),
        )
        future = self._watch(job_id, Future(), scope, session)
        assert future is not None
        if wait:
            future.result()
        return future

    def _watch(
        self, job_id: int, future: Future[Outcome] | None, scope: str, session: str
    ) -> Future[Outcome] | None:
        with self._lock:
            known = self._watched.get(job_id)
            if known is not None and known[0] is not None:
                future = known[0]  # a deduplicated end shares the live job's future
            self._watched[job_id] = (future, scope, session)
        self._ensure_thread()
        self._wake.set()  # this process's worker looks at once instead of after its back-off
        return future

    # -- the worker thread -----------------------------------------------------------

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._loop, name=f"engram-jobs-{self.worker_id}", daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        delay = POLL_MIN
        while not self._stop.is_set():
            job: Job | None = None
            if self.run_jobs:
                try:
                    job = self.queue.claim(KINDS, lease=self.lease)
                except EngramError:
                    log.exception("could not claim a job")
            if job is not None:
                self._run(job)
                delay = POLL_MIN
            try:
                self._refresh()
            except EngramError:
                log.exception("could not read the status of queued jobs")
            if job is not None:
                continue  # there may be more ready work: claim again without waiting
            if self._wake.wait(delay):
                self._wake.clear()
                delay = POLL_MIN
            else:
                delay = min(delay * 2, POLL_MAX)

    def _run(self, job: Job) -> None:
        outcome: Outcome | None = None
        try:
            if job.session is None:
                raise InvalidQuery(f"job {job.id} ({job.kind}) names no session")
            if job.kind == COMPACTION:
                result = self._compact(job, job.session)
            else:
                outcome = remember(
                    self._handlers.memories(job.scope),
                    job.session,
                    str(job.payload.get("reason", "ended")),
                )
                result = outcome.to_dict()
        except Exception as exc:  # a background failure must not kill the worker
            log.exception("job %s (%s of %s/%s) failed", job.id, job.kind, job.scope, job.session)
            self.failed += 1
            try:
                self.queue.fail(job.id, f"{type(exc).__name__}: {exc}"[:500])
            except EngramError:
                log.exception("could not record the failure of job %s", job.id)
            return
        self.completed += 1
        try:
            self.queue.complete(job.id, result)
        except NotFound:
            # Our lease ran out and another worker took the job over: it finishes it.
            log.warning("job %s outlived its lease; another worker holds it now", job.id)
            return
        except EngramError:
            log.exception("could not mark job %s done", job.id)
            return
        if outcome is not None:
            with self._lock:
                watched = self._watched.pop(job.id, None)
            if watched is not None and watched[0] is not None:
                _settle(watched[0], outcome)

    def _compact(self, job: Job, session: str) -> dict[str, Any]:
        spec = job.payload.get("policy")
        policy = get_policy(spec) if isinstance(spec, dict) else None  # None: the stored one
        extra = job.payload.get("extra_tokens", 0)
        result = self._handlers.compact(
            job.scope, session, policy, extra_tokens=int(extra) if isinstance(extra, int) else 0
        )
        return {
            "committed": result.committed,
            "reason": result.reason,
            "watermark": result.watermark,
            "version": result.version,
            "degraded": result.degraded,
        }

    # -- watching this Engram's jobs -------------------------------------------------

    def _refresh(self) -> None:
        """Forget finished jobs of this Engram, resolving their futures."""
        with self._lock:
            ids = list(self._watched)
        if not ids:
            return
        jobs = self.queue.get_many(ids)
        for job_id in ids:
            job = jobs.get(job_id)
            if job is not None and job.status in LIVE:
                continue
            with self._lock:
                watched = self._watched.pop(job_id, None)
            if watched is not None and watched[0] is not None:
                _settle(watched[0], self._outcome_of(job, watched[1], watched[2]))

    def _outcome_of(self, job: Job | None, scope: str, session: str) -> Outcome:
        """The outcome of a finished memory job, as another worker recorded it."""
        if job is None:
            return Outcome("failed", scope, session, detail="the job was deleted")
        if job.status != "done":
            return Outcome("failed", scope, session, detail=job.error or job.status)
        result = job.result if isinstance(job.result, dict) else {}
        memory = None
        stored = result.get("memory")
        if isinstance(stored, dict) and isinstance(stored.get("id"), int):
            try:
                memory = self._handlers.memories(scope).get(stored["id"])
            except EngramError:
                memory = None  # deleted since, or unreadable: the status still tells
        return Outcome(
            str(result.get("status", "failed")),
            scope,
            session,
            memory=memory,
            detail=str(result.get("detail", "")),
        )

    def pending(self) -> int:
        """Jobs this Engram enqueued that are not known to be finished."""
        with self._lock:
            return len(self._watched)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every job this Engram enqueued is done or failed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._refresh()
            with self._lock:
                if not self._watched:
                    return True
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            time.sleep(WATCH_POLL if remaining is None else min(WATCH_POLL, remaining))

    def close(self, timeout: float | None = None) -> bool:
        """Let the running job finish (up to ``timeout`` s), claim no new one. Safe twice.

        Jobs still queued stay in the table for the other workers; futures of
        this Engram's jobs that are still unresolved are cancelled. False when
        the running job outlived ``timeout`` (its lease lets another worker
        take it over).
        """
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout)
        finished = thread is None or not thread.is_alive()
        try:
            self._refresh()  # resolve what finished meanwhile
        except EngramError:
            log.exception("could not read the status of queued jobs at close")
        with self._lock:
            left, self._watched = list(self._watched.values()), {}
        for future, _scope, _session in left:
            if future is not None:
                future.cancel()  # the job stays queued; another worker will do it
        return finished


def _settle(future: Future[Outcome], outcome: Outcome) -> None:
    try:
        future.set_result(outcome)
    except InvalidStateError:  # already resolved by the other path (or cancelled)
        pass
