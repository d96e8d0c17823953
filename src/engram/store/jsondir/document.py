"""The human-readable session document (the context file, extended).

One JSON document per session. The fields are all there, so a person
(or the original Rust runtime) can read it::

    {
      "format": "engram.session", "format_version": 1,
      "session_id": "user:agent:123", "scope": "default",
      "created_at": "...", "updated_at": "...", "policy": {...} | null,
      "system_state": {...}, "facts": [...], "long_term_summary": "...",
      "active_tasks": [...], "tool_stats": {...}, "last_known_environment": {...},
      "token_usage": {...},
      "recent_history": [
        {"id": 7, "timestamp": 1708654321, "created_at": "2024-02-23T02:12:01.5+00:00",
         "role": "user", "content": "...", "token_count": 5,
         "name": ..., "tool_calls": [...], "tool_call_id": ..., "metadata": {...},
         "parts": [...]}
      ],
      "states": {"compaction": {"version": 3, "updated_at": "...", "data": {...}}},
      "totals": {"message_count": 1, "token_count": 5,
                 "first_message_at": ..., "last_message_at": ...},
      "log_generation": "3f2a9c1e0b7d4a55"
    }

``log_generation`` (jsondir only) names the session's append log: messages
added since the document was last rewritten are in ``<session>.jsonl`` beside
it, when that log's header carries this generation (see
:mod:`engram.store.jsondir.log`). A document without it has no log: every
message is in ``recent_history`` (documents written before the logs existed,
exports, and files of the agent runtime).

Engram keeps every message, so ``recent_history`` holds the whole history
(the agent runtime trimmed it after compaction; here the summary lives in the
``compaction`` state and nothing is dropped). ``states`` is authoritative; the
seed's top-level agent fields (``facts``, ``active_tasks``...) and
``long_term_summary`` are copies of the ``agent_state`` and ``compaction`` states,
written for people and for readers of the agent runtime's format, and only read back when a
document has no ``states`` at all (a file written by the agent runtime itself).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from engram.errors import CorruptedData
from engram.models import AGENT_STATE_KIND, IMPORTED_ORIGIN, JSON, Message, SessionInfo, StateRecord

FORMAT = "engram.session"
FORMAT_VERSION = 1

#: Agent-runtime fields mirrored from the ``agent_state`` state, with their empty values.
AGENT_FIELDS: dict[str, Any] = {
    "system_state": {"last_workspace": None, "preferences": {}},
    "facts": [],
    "active_tasks": [],
    "tool_stats": {"total_calls": 0, "by_tool": {}, "failures": 0},
    "last_known_environment": {},
    "token_usage": {"total_input": 0, "total_output": 0, "by_session": 0},
}


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with microseconds kept (None stays None)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def parse_time(value: object, what: str) -> datetime:
    """An ISO-8601 string (or unix seconds, as the agent runtime wrote) as an aware UTC datetime."""
    try:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, int | float):
            return datetime.fromtimestamp(float(value), tz=UTC)
        if isinstance(value, str):
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        pass
    raise CorruptedData(f"{what} is not a timestamp: {value!r}")


def parse_time_or_none(value: object, what: str) -> datetime | None:
    """Like :func:`parse_time`, but None stays None."""
    return None if value is None else parse_time(value, what)


def message_entry(message: Message) -> JSON:
    """One ``recent_history`` entry (agent-runtime fields first, then Engram's)."""
    entry: JSON = {
        "id": message.id,
        "timestamp": int(message.created_at.timestamp()),
        "created_at": iso(message.created_at),
        "role": message.role,
        "content": message.content,
        "token_count": message.tokens,
    }
    if message.name is not None:
        entry["name"] = message.name
    if message.tool_calls is not None:
        entry["tool_calls"] = message.tool_calls
    if message.tool_call_id is not None:
        entry["tool_call_id"] = message.tool_call_id
    entry["metadata"] = dict(message.metadata)
    if message.parts is not None:
        entry["parts"] = message.parts
    return entry


def entry_message(scope: str, session: str, entry: Mapping[str, Any], *, where: str) -> Message:
    """A :class:`Message` from a ``recent_history`` entry that has an ``id``.

    Raises:
        CorruptedData: the entry is missing fields or has wrong types.

    """
    try:
        tokens = entry.get("token_count")
        tool_calls = entry.get("tool_calls")
        metadata = entry.get("metadata") or {}
        parts = entry.get("parts")
        if parts is not None and not isinstance(parts, list):
            raise TypeError("parts must be a list")
        if not isinstance(entry["role"], str) or not isinstance(entry["content"], str):
            raise TypeError("role and content must be strings")
        if tool_calls is not None and not isinstance(tool_calls, list):
            raise TypeError("tool_calls must be a list")
        if not isinstance(metadata, dict):
            raise TypeError("metadata must be an object")
        return Message(
            id=int(entry["id"]),
            scope=scope,
            session=session,
            role=entry["role"],
            content=entry["content"],
            created_at=parse_time(entry.get("created_at", entry.get("timestamp")), f"{where} time"),
            tokens=int(tokens) if tokens is not None else 0,
            name=entry.get("name"),
            tool_calls=copy.deepcopy(tool_calls),
            tool_call_id=entry.get("tool_call_id"),
            metadata=copy.deepcopy(metadata),
            parts=copy.deepcopy(parts),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptedData(f"{where}: bad history entry ({exc})") from None


def state_entry(record: StateRecord) -> JSON:
    """One value of the ``states`` object."""
    return {"version": record.version, "updated_at": iso(record.updated_at), "data": record.data}


def entry_state(kind: str, entry: Mapping[str, Any], *, where: str) -> StateRecord:
    """A :class:`StateRecord` from a ``states`` value."""
    try:
        data = entry["data"]
        if not isinstance(data, dict):
            raise TypeError("data must be an object")
        return StateRecord(
            kind=kind,
            version=int(entry["version"]),
            data=copy.deepcopy(data),  # documents are cached: callers get their own copy
            updated_at=parse_time(entry["updated_at"], f"{where} state {kind} updated_at"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptedData(f"{where}: bad state {kind!r} ({exc})") from None


def _system_state(agent: Mapping[str, Any]) -> JSON:
    """The ``system_state`` from the agent state (workspace and preferences)."""
    stored = agent.get("system_state")
    stored = stored if isinstance(stored, Mapping) else {}
    environment = agent.get("last_known_environment")
    environment = environment if isinstance(environment, Mapping) else {}
    preferences = agent.get("preferences", stored.get("preferences", {}))
    return {
        "last_workspace": environment.get("workspace", stored.get("last_workspace")),
        "preferences": dict(preferences) if isinstance(preferences, Mapping) else {},
    }


def totals(info: SessionInfo) -> JSON:
    """The ``totals`` object of a document."""
    return {
        "message_count": info.message_count,
        "token_count": info.token_count,
        "first_message_at": iso(info.first_message_at),
        "last_message_at": iso(info.last_message_at),
    }


def build_document(
    info: SessionInfo,
    messages: list[Message],
    states: list[StateRecord],
    *,
    log_generation: str | None = None,
) -> JSON:
    """The whole document for one session (naming its append log, if it has one)."""
    by_kind = {record.kind: record for record in states}
    agent = by_kind[AGENT_STATE_KIND].data if AGENT_STATE_KIND in by_kind else {}
    compaction = by_kind["compaction"].data if "compaction" in by_kind else {}
    summary = compaction.get("summary") or agent.get("long_term_summary") or ""
    doc: JSON = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "session_id": info.id,
        "scope": info.scope,
        "created_at": iso(info.created_at),
        "updated_at": iso(info.updated_at),
        "policy": info.policy,
    }
    for name, empty in AGENT_FIELDS.items():
        doc[name] = agent.get(name, empty)
    doc["system_state"] = _system_state(agent)
    doc["long_term_summary"] = summary if isinstance(summary, str) else str(summary)
    doc["recent_history"] = [message_entry(m) for m in messages]
    doc["states"] = {kind: state_entry(by_kind[kind]) for kind in sorted(by_kind)}
    doc["totals"] = totals(info)
    if log_generation is not None:
        doc["log_generation"] = log_generation
    return doc


def document_info(doc: Mapping[str, Any], *, where: str) -> SessionInfo:
    """The :class:`SessionInfo` a stored document describes."""
    try:
        totals = doc.get("totals") or {}
        policy = doc.get("policy")
        if policy is not None and not isinstance(policy, dict):
            raise TypeError("policy must be an object or null")
        session_id = doc["session_id"]
        scope = doc["scope"]
        if not isinstance(session_id, str) or not isinstance(scope, str):
            raise TypeError("session_id and scope must be strings")
        return SessionInfo(
            scope=scope,
            id=session_id,
            created_at=parse_time(doc["created_at"], f"{where} created_at"),
            updated_at=parse_time(doc["updated_at"], f"{where} updated_at"),
            message_count=int(totals.get("message_count", 0)),
            token_count=int(totals.get("token_count", 0)),
            policy=policy,
            first_message_at=parse_time_or_none(totals.get("first_message_at"), where),
            last_message_at=parse_time_or_none(totals.get("last_message_at"), where),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptedData(f"{where}: not an Engram session document ({exc})") from None


def document_states(doc: Mapping[str, Any], *, where: str) -> list[StateRecord]:
    """The state records of a document.

    A document without ``states`` (written by the agent runtime) yields an ``agent_state``
    state built from its top-level fields and, if it has a summary, a
    ``compaction`` state holding it.
    """
    states = doc.get("states")
    if isinstance(states, dict):
        return [entry_state(str(kind), entry, where=where) for kind, entry in states.items()]
    if states is not None:
        raise CorruptedData(f"{where}: 'states' must be an object")
    now = datetime.now(UTC)
    out = []
    agent = {name: doc[name] for name in AGENT_FIELDS if name in doc}
    system_state = doc.get("system_state")
    if isinstance(system_state, Mapping) and isinstance(system_state.get("preferences"), Mapping):
        agent.setdefault("preferences", dict(system_state["preferences"]))
    if agent:
        out.append(StateRecord(kind=AGENT_STATE_KIND, version=1, data=agent, updated_at=now))
    summary = doc.get("long_term_summary")
    if isinstance(summary, str) and summary:
        out.append(
            StateRecord(
                kind="compaction",
                version=1,
                # covers history older than every imported message: watermark 0
                data={
                    "summary": summary,
                    "summary_version": 1,
                    "watermark": 0,
                    "origin": IMPORTED_ORIGIN,
                },
                updated_at=now,
            )
        )
    return out


def document_history(doc: Mapping[str, Any], *, where: str) -> list[Any]:
    """The raw ``recent_history`` list of a document."""
    history = doc.get("recent_history", [])
    if not isinstance(history, list):
        raise CorruptedData(f"{where}: 'recent_history' must be a list")
    return history
