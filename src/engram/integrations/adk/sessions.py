"""``EngramSessionService``: Google ADK's sessions kept in Engram."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from engram.aio import AsyncEngram, offload
from engram.engine import Engram
from engram.integrations.adk.events import (
    event_message,
    merged_state,
    message_event,
    scope_of,
    split_state,
)
from engram.integrations.paging import every, newest
from engram.models import JSON

#: Name of the ADK document kept with each session, and with the state holders below.
DOC = "adk"
#: Session holding a user's ``user:`` state (in the user's scope).
USER_STATE = "adk:user-state"
#: Session holding an app's ``app:`` state (in the scope named after the app).
APP_STATE = "adk:app-state"
_RESERVED = (USER_STATE, APP_STATE)


class EngramSessionService(BaseSessionService):
    """ADK sessions in Engram: every event a message, state in the session's documents.

    Each user of an app is the Engram scope ``app.user`` and each ADK session
    one of its sessions, so the dashboard, search, compaction and memories see
    the conversation. Events are stored verbatim (see
    :mod:`engram.integrations.adk.events`) and in order; an event appended
    twice (same id) is stored once. ``temp:`` state is never stored; ``user:``
    and ``app:`` state are shared by the user's (the app's) sessions. An
    append from a session object older than what is stored raises ADK's
    ``StaleSessionError``, as ADK's own database services do.
    """

    def __init__(self, engram: Engram | AsyncEngram) -> None:
        """Keep sessions in ``engram`` (the caller owns it and closes it)."""
        self.engram = engram.sync if isinstance(engram, AsyncEngram) else engram

    # -- BaseSessionService ------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session (its id generated when not given), with its initial state."""
        return await offload(self._create, app_name, user_id, state or {}, session_id)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (``config`` may keep only the newest or latest)."""
        return await offload(self._get, app_name, user_id, session_id, config)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The sessions of a user (or of every user of the app), without events, oldest first."""
        return await offload(self._list, app_name, user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session with its events and state (a user's and app's state stay)."""
        if session_id not in _RESERVED:
            scope = scope_of(app_name, user_id)
            await offload(self.engram.delete_session, session_id, scope)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """A user's ``user:`` state, keys without the prefix."""
        return await offload(self._state, scope_of(app_name, user_id), USER_STATE)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store the event (``temp:`` state left out) and apply it to ``session``."""
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        await offload(self._append, session, event)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    # -- the work, on a worker thread ------------------------------------------------------

    def _create(
        self, app_name: str, user_id: str, state: dict[str, Any], session_id: str | None
    ) -> Session:
        scope = scope_of(app_name, user_id)
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        if session_id in _RESERVED:
            raise ValueError(f"session id {session_id!r} is reserved for Engram's ADK state")
        if self.engram.session_info(session_id, scope) is not None:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        app, user, own = split_state(_json(state))
        now = time.time()

        def create(current: JSON) -> JSON:
            if current:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            return {"state": own, "created": now, "updated": now}

        self.engram.update_app_document(scope, session_id, DOC, create)
        self._share(app_name, scope, app, user, now)
        return self._session(app_name, user_id, session_id, [], own, now)

    def _get(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None
    ) -> Session | None:
        scope = scope_of(app_name, user_id)
        if session_id in _RESERVED or self.engram.session_info(session_id, scope) is None:
            return None
        doc = self.engram.app_document(scope, session_id, DOC)
        chat = self.engram.session(session_id, scope)
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        if recent == 0:
            events: list[Event] = []
        elif recent is not None and after is None:
            events = [message_event(m) for m in newest(chat, recent)]
        else:
            events = [message_event(m) for m in every(chat)]
            if after is not None:
                events = [e for e in events if e.timestamp >= after]
            if recent is not None:
                events = events[-recent:]
        updated = float(doc.get("updated") or 0.0)
        return self._session(app_name, user_id, session_id, events, doc.get("state", {}), updated)

    def _list(self, app_name: str, user_id: str | None) -> ListSessionsResponse:
        if user_id is not None:
            users = [user_id]
        else:
            prefix = scope_of(app_name, "")
            users = [s[len(prefix) :] for s in self.engram.scopes() if s.startswith(prefix)]
        found = []
        for user in users:
            scope = scope_of(app_name, user)
            offset = 0
            while True:
                page = self.engram.sessions(scope, limit=1000, offset=offset)
                for info in page:
                    if info.id in _RESERVED:
                        continue
                    doc = self.engram.app_document(scope, info.id, DOC)
                    updated = float(doc.get("updated") or info.updated_at.timestamp())
                    found.append(
                        self._session(app_name, user, info.id, [], doc.get("state", {}), updated)
                    )
                if len(page) < 1000:
                    break
                offset += len(page)
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=found)

    def _append(self, session: Session, event: Event) -> None:
        scope = scope_of(session.app_name, session.user_id)
        if self.engram.session_info(session.id, scope) is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        stored = self.engram.app_document(scope, session.id, DOC)
        if float(stored.get("updated") or 0.0) > session.last_update_time:
            raise StaleSessionError(
                f"session {session.id} changed in Engram after this copy was read"
                " (its last_update_time is older than the stored one); get it again"
            )
        delta = event.actions.state_delta if event.actions else {}
        app, user, own = split_state(_json(delta))
        chat = self.engram.session(session.id, scope)
        chat.add_many([event_message(event)], idempotency_key=event.id or None)

        self.engram.update_app_document(scope, session.id, DOC, _merging(own, event.timestamp))
        self._share(session.app_name, scope, app, user, event.timestamp)

    def _share(self, app_name: str, scope: str, app: JSON, user: JSON, when: float) -> None:
        """Apply ``app:`` and ``user:`` state changes to their holders."""
        for holder_scope, holder, change in ((app_name, APP_STATE, app), (scope, USER_STATE, user)):
            if change:
                self.engram.update_app_document(holder_scope, holder, DOC, _merging(change, when))

    def _state(self, scope: str, holder: str) -> JSON:
        state = self.engram.app_document(scope, holder, DOC).get("state", {})
        return dict(state) if isinstance(state, Mapping) else {}

    def _session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: list[Event],
        own: JSON,
        updated: float,
    ) -> Session:
        app = self._state(app_name, APP_STATE)
        user = self._state(scope_of(app_name, user_id), USER_STATE)
        return Session(
            app_name=app_name,
            user_id=user_id,
            id=session_id,
            state=merged_state(app, user, dict(own)),
            events=events,
            last_update_time=updated,
        )


def _json(state: Mapping[str, Any]) -> JSON:
    """State as plain JSON (ADK allows any value; a state document holds JSON)."""
    out: JSON = json.loads(json.dumps(dict(state), default=str))
    return out


def _merging(change: JSON, when: float) -> Callable[[JSON], JSON]:
    """The document update that applies a state delta at ``when`` (ADK: the event's time)."""

    def merge(current: JSON) -> JSON:
        return {**current, "state": {**current.get("state", {}), **change}, "updated": when}

    return merge
