"""Google ADK's session and memory services over Engram (extra: ``adk``).

::

    from engram.integrations.adk import EngramMemoryService, EngramSessionService

    runner = Runner(
        agent=agent,
        app_name="support",
        session_service=EngramSessionService(engram),
        memory_service=EngramMemoryService(engram),
    )

:class:`EngramSessionService` is ADK's ``BaseSessionService``: each user of
an app is the Engram scope ``app.user``, each ADK session an Engram session
whose messages are its events, kept verbatim and in order; ``get_session``
honours ``num_recent_events`` and ``after_timestamp``; ``temp:`` state is
never stored. :class:`EngramMemoryService` is ADK's ``BaseMemoryService``:
a session added to memory becomes an Engram long-term memory of the user,
and ``search_memory`` is Engram's search over the user's memories and
conversations. Nothing here calls a model of ADK's; Engram's own model (when
it has one) writes the memories.
"""

from __future__ import annotations

from engram.errors import MissingDependency

try:
    from engram.integrations.adk.memory import EngramMemoryService
    from engram.integrations.adk.sessions import EngramSessionService
except ImportError as exc:  # pragma: no cover - depends on the extra
    if exc.name is None or not exc.name.startswith("google"):
        raise
    raise MissingDependency.extra("engram.integrations.adk", "adk", exc) from exc

__all__ = ["EngramMemoryService", "EngramSessionService"]
