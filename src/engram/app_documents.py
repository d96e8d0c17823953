"""A framework's own JSON documents kept with a session, saved by compare-and-set.

Adapters whose framework keeps state beside the conversation (Google ADK's
session, user and app state) store it here, as a state document of the
session named ``app:<name>``, so it can never collide with Engram's own
(compaction, agent state, tool cache, lifecycle). Saving one creates the
session, empty, when it does not exist yet.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from engram.errors import InvalidQuery
from engram.models import JSON
from engram.statedoc import compare_and_set
from engram.store.base import StateStore

#: Prefix of the store's state kind for an application document.
KIND_PREFIX = "app:"


def kind(name: str) -> str:
    """The store's state kind of the application document ``name``.

    Raises:
        InvalidQuery: an empty or over-long name.

    """
    if not isinstance(name, str) or not name or len(name) > 64:
        raise InvalidQuery(f"an application document name must be 1-64 characters, got {name!r}")
    return KIND_PREFIX + name


def load(store: StateStore, scope: str, session: str, name: str) -> tuple[JSON, int]:
    """The document and its version (``({}, 0)`` before the first save)."""
    record = store.load_state(scope, session, kind(name))
    return (copy.deepcopy(record.data), record.version) if record is not None else ({}, 0)


def update(
    store: StateStore, scope: str, session: str, name: str, change: Callable[[JSON], JSON | None]
) -> JSON:
    """Apply ``change`` (a pure function; None: nothing to save) until a save wins the race."""

    def save(data: JSON, version: int) -> bool:
        return (
            store.save_state(scope, session, kind(name), data, expected_version=version) is not None
        )

    return compare_and_set(
        lambda: load(store, scope, session, name),
        change,
        save,
        what=f"application document {name!r} of {scope}/{session}",
    )
