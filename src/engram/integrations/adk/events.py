"""ADK events as Engram messages and back, and the scope an app's user lives in.

Every event becomes one message: ``user`` when the user wrote it, else
``assistant`` named after the agent. Its content is the event's readable text
(text parts, then one line per tool call, tool result or file) so Engram's
search, summaries and memories read it; the event itself is kept verbatim,
as ADK's JSON, in the message's ``metadata["adk_event"]``, and comes back
from it unchanged. A message written through another interface (REST, MCP)
reads as a plain text event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.state import State
from google.genai import types

from engram.models import JSON, Message

#: Message metadata field holding the event's JSON.
EVENT = "adk_event"
#: Separator of the app and the user in a scope name (ADK app names never hold it).
SEP = "."
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LINE = 300  # characters of a tool call's arguments or result shown in the text


def scope_of(app_name: str, user_id: str) -> str:
    """The Engram scope of one user of one app: ``app.user``.

    Raises:
        ValueError: an app name holding ``.`` (ADK's own rule forbids it too).

    """
    if SEP in app_name or not app_name:
        raise ValueError(
            f"app name {app_name!r}: letters, digits, '_' and '-' only (ADK's rule); Engram"
            f" keeps each user of an app in the scope 'app{SEP}user'"
        )
    return f"{app_name}{SEP}{user_id}"


def event_message(event: Event) -> JSON:
    """The message that stores ``event`` (for ``Session.add_many``)."""
    message: JSON = {
        "role": "user" if event.author == "user" else "assistant",
        "content": event_text(event),
        "created_at": datetime.fromtimestamp(event.timestamp, UTC),
        "metadata": {EVENT: json.loads(event.model_dump_json(exclude_none=True))},
    }
    if message["role"] == "assistant" and _NAME.fullmatch(event.author or ""):
        message["name"] = event.author
    return message


def message_event(message: Message) -> Event:
    """The event a stored message holds (a plain text event for a message without one)."""
    stored = message.metadata.get(EVENT)
    if isinstance(stored, Mapping):
        return Event.model_validate(stored)
    author = "user" if message.role == "user" else message.name or message.role
    return Event(
        id=f"engram-{message.id}",
        invocation_id="",
        author=author,
        timestamp=message.created_at.timestamp(),
        content=types.Content(
            role="user" if message.role == "user" else "model",
            parts=[types.Part(text=message.content)],
        ),
    )


def event_id(message: Message) -> str | None:
    """The id of the event a message stores, if it stores one."""
    stored = message.metadata.get(EVENT)
    return str(stored.get("id")) if isinstance(stored, Mapping) and stored.get("id") else None


def event_text(event: Event) -> str:
    """What an event says, as text; never empty (a state-only event says what changed)."""
    lines = [_part_text(part) for part in (event.content.parts or [])] if event.content else []
    text = "\n".join(line for line in lines if line)
    if text.strip():
        return text
    delta = event.actions.state_delta if event.actions else {}
    if delta:
        return f"[state: {', '.join(sorted(delta))}]"
    if event.actions and event.actions.transfer_to_agent:
        return f"[transfer to {event.actions.transfer_to_agent}]"
    return "[event without content]"


def _part_text(part: types.Part) -> str:
    if part.thought:
        return ""  # a model's private reasoning is not part of the conversation
    if part.text:
        return part.text
    if part.function_call:
        call = part.function_call
        return f"[tool call {call.name}({_short(call.args)})]"
    if part.function_response:
        answer = part.function_response
        return f"[tool result {answer.name}: {_short(answer.response)}]"
    if part.inline_data:
        return f"[{part.inline_data.mime_type or 'binary'} data]"
    if part.file_data:
        return f"[file {part.file_data.file_uri}]"
    if part.executable_code:
        return part.executable_code.code or ""
    if part.code_execution_result:
        return part.code_execution_result.output or ""
    return ""


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if value is not None else ""
    return text if len(text) <= _LINE else text[: _LINE - 1] + "…"


def split_state(delta: Mapping[str, Any]) -> tuple[JSON, JSON, JSON]:
    """``(app, user, session)`` parts of a state delta; ``temp:`` keys are dropped."""
    app: JSON = {}
    user: JSON = {}
    session: JSON = {}
    for key, value in delta.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return app, user, session


def merged_state(app: Mapping[str, Any], user: Mapping[str, Any], session: JSON) -> JSON:
    """A session's state as ADK shows it: its own keys, then ``app:`` and ``user:`` ones."""
    out = dict(session)
    out.update({State.APP_PREFIX + k: v for k, v in app.items()})
    out.update({State.USER_PREFIX + k: v for k, v in user.items()})
    return out
