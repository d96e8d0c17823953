"""A small background-job queue over the PostgreSQL store.

Any Engram server sharing the database may run any job: a worker claims the
oldest ready job with ``SELECT ... FOR UPDATE SKIP LOCKED``, so two workers
never get the same job and neither waits for the other. A claim is a lease:
a worker that dies leaves its job ``running`` until ``locked_until`` passes,
after which another worker may claim it again. Jobs with a ``dedupe_key``
(e.g. ``"compact:<scope>/<session>"``) are enqueued at most once while pending
or running.

Typical jobs: ``compaction`` of a session, ``memory`` creation for a scope.
The handler decides what a job does; this module only hands them out.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import psycopg
from psycopg.types.json import Jsonb

from engram.errors import ConfigError, NotFound, StoreError
from engram.models import JSON

#: How long a claimed job stays reserved for its worker by default.
DEFAULT_LEASE = timedelta(minutes=5)
#: Attempts before a failing job is left as ``failed``.
DEFAULT_MAX_ATTEMPTS = 3
#: Delay before a failed job is retried (multiplied by the attempt number).
RETRY_DELAY = timedelta(seconds=30)

_COLUMNS = (
    "id, kind, scope, session, payload, dedupe_key, status, attempts, max_attempts, "
    "run_after, locked_by, locked_until, result, error, created_at, updated_at"
)


@dataclass(frozen=True, slots=True)
class Job:
    """One queued job as a worker sees it."""

    id: int
    kind: str
    scope: str
    session: str | None
    payload: JSON
    dedupe_key: str | None
    status: str
    attempts: int
    max_attempts: int
    run_after: datetime
    locked_by: str | None
    locked_until: datetime | None
    result: JSON | None = None
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = field(default=None, compare=False)


def _job(row: Any) -> Job:
    return Job(*row)


def default_worker_id() -> str:
    """``host:pid``: enough to tell in the table which server holds a job."""
    return f"{socket.gethostname()}:{os.getpid()}"


@runtime_checkable
class _Pooled(Protocol):
    """A PostgreSQL store: lends connections of its pool."""

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection for the ``with`` block."""
        ...


#: Inserts tried when the live job a dedupe key conflicts with keeps finishing meanwhile.
ENQUEUE_ATTEMPTS = 5

_INSERT_JOB = """
    INSERT INTO jobs (kind, scope, session, payload, dedupe_key, run_after, max_attempts)
    VALUES (%s, %s, %s, %s, %s, coalesce(%s, now()), %s)
    ON CONFLICT (kind, dedupe_key)
        WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running')
    DO NOTHING
    RETURNING id
"""


class JobQueue:
    """Enqueue, claim, complete and fail jobs in the ``jobs`` table of a PostgreSQL store."""

    def __init__(self, store: _Pooled, *, worker_id: str | None = None) -> None:
        """Use ``store``'s pool; ``worker_id`` names this worker in claimed rows."""
        if not isinstance(store, _Pooled):
            raise ConfigError("the job queue needs a PostgreSQL store (postgresql://...)")
        self.store = store
        self.worker_id = worker_id or default_worker_id()

    def enqueue(
        self,
        kind: str,
        *,
        scope: str,
        session: str | None = None,
        payload: Mapping[str, Any] | None = None,
        dedupe_key: str | None = None,
        run_after: datetime | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> int:
        """Queue a job; return its id (the existing live job's id when ``dedupe_key`` matches)."""
        params = (
            kind,
            scope,
            session,
            Jsonb(dict(payload or {})),
            dedupe_key,
            run_after,
            max(1, int(max_attempts)),
        )
        with self.store.connection() as conn:
            # A conflicting live job may finish between the insert and the look-up:
            # then nothing blocks the insert any more, so it is tried again.
            for _ in range(ENQUEUE_ATTEMPTS):
                row = conn.execute(_INSERT_JOB, params).fetchone()
                if row is None:
                    row = conn.execute(
                        "SELECT id FROM jobs WHERE kind = %s AND dedupe_key = %s "
                        "AND status IN ('pending', 'running')",
                        (kind, dedupe_key),
                    ).fetchone()
                if row is not None:
                    return int(row[0])
        raise StoreError(f"could not enqueue {kind!r} job {dedupe_key!r}: it kept finishing")

    def claim(
        self, kinds: list[str] | None = None, *, lease: timedelta = DEFAULT_LEASE
    ) -> Job | None:
        """Take the oldest ready job (pending, or running with an expired lease), or None.

        Ready means ``run_after <= now()``. The row lock taken with SKIP LOCKED
        makes concurrent claims from any number of servers pick distinct jobs.
        """
        kind_filter = "AND kind = ANY(%(kinds)s)" if kinds is not None else ""
        with self.store.connection() as conn:
            row = conn.execute(
                f"""
                WITH next AS (
                    SELECT id FROM jobs
                    WHERE run_after <= now() {kind_filter}
                      AND (status = 'pending' OR (status = 'running' AND locked_until < now()))
                    ORDER BY run_after, id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE jobs SET status = 'running', attempts = attempts + 1,
                       locked_by = %(worker)s, locked_until = now() + %(lease)s,
                       updated_at = now()
                FROM next WHERE jobs.id = next.id
                RETURNING {", ".join("jobs." + c.strip() for c in _COLUMNS.split(","))}
                """,
                {"kinds": kinds, "worker": self.worker_id, "lease": lease},
            ).fetchone()
            return None if row is None else _job(row)

    def complete(self, job_id: int, result: Mapping[str, Any] | None = None) -> Job:
        """Mark a job this worker holds as done, with an optional result."""
        return self._finish(
            job_id,
            "status = 'done', result = %(result)s, error = NULL",
            {"result": Jsonb(dict(result or {}))},
        )

    def fail(self, job_id: int, error: str, *, retry: bool = True) -> Job:
        """Record a failure: back to pending (after a delay) while attempts remain, else failed."""
        return self._finish(
            job_id,
            """
            error = %(error)s,
            status = CASE WHEN %(retry)s AND attempts < max_attempts
                          THEN 'pending' ELSE 'failed' END,
            run_after = CASE WHEN %(retry)s AND attempts < max_attempts
                             THEN now() + %(delay)s * attempts ELSE run_after END
            """,
            {"error": error, "retry": retry, "delay": RETRY_DELAY},
        )

    def _finish(self, job_id: int, assignments: str, params: dict[str, Any]) -> Job:
        with self.store.connection() as conn:
            row = conn.execute(
                f"""
                UPDATE jobs SET {assignments}, locked_by = NULL, locked_until = NULL,
                       updated_at = now()
                WHERE id = %(id)s AND status = 'running' AND locked_by = %(worker)s
                RETURNING {_COLUMNS}
                """,
                {**params, "id": int(job_id), "worker": self.worker_id},
            ).fetchone()
        if row is None:
            raise NotFound(f"job {job_id} is not running under worker {self.worker_id!r}")
        return _job(row)

    def get(self, job_id: int) -> Job | None:
        """One job by id, whatever its status."""
        with self.store.connection() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE id = %s", (int(job_id),)
            ).fetchone()
        return None if row is None else _job(row)

    def get_many(self, job_ids: list[int]) -> dict[int, Job]:
        """The jobs among ``job_ids`` that exist, by id (one query, for watchers)."""
        if not job_ids:
            return {}
        with self.store.connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE id = ANY(%s)", ([int(i) for i in job_ids],)
            ).fetchall()
        return {job.id: job for job in map(_job, rows)}

    def counts(self) -> dict[str, int]:
        """How many jobs are in each status."""
        with self.store.connection() as conn:
            rows = conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
        return {str(status): int(n) for status, n in rows}
