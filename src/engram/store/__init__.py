"""Storage backends, chosen by URL through one scheme table.

``sqlite:///path.db`` (default), ``postgresql://...`` (needs the ``postgres``
extra), ``jsondir:///path`` (one human-readable JSON document per session).
Backends are imported lazily so a missing extra only matters when it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

from engram.errors import ConfigError
from engram.store.base import MAX_PAGE, Store

#: scheme -> "module:Class"; each class has ``from_url(url, **options)``.
BACKENDS: dict[str, str] = {
    "sqlite": "engram.store.sqlite.backend:SQLiteStore",
    "postgresql": "engram.store.postgres.backend:PostgresStore",
    "postgres": "engram.store.postgres.backend:PostgresStore",
    "jsondir": "engram.store.jsondir.backend:JsonDirStore",
    "memory": "engram.store.memory.backend:MemoryStore",
}

DEFAULT_URL = "sqlite:///./engram.db"


def open_store(url: str | None = None, **options: Any) -> Store:
    """Open the backend the URL names (default ``sqlite:///./engram.db``)."""
    url = url or DEFAULT_URL
    scheme, sep, _ = url.partition(":")
    if not sep:
        raise ConfigError(f"store URL {url!r} has no scheme; use one of {sorted(BACKENDS)}")
    target = BACKENDS.get(scheme.lower().split("+", 1)[0])
    if target is None:
        raise ConfigError(
            f"unknown store scheme {scheme!r} in {url!r}; use one of {sorted(BACKENDS)}"
        )
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(module_name)
    store: Store = getattr(module, class_name).from_url(url, **options)
    return store


__all__ = ["BACKENDS", "DEFAULT_URL", "MAX_PAGE", "Store", "open_store"]
