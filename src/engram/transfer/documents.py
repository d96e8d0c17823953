"""Moving data between stores: export a session, import a document, copy a whole store.

The exchange format is the jsondir session document (:mod:`engram.store.jsondir.document`,
the context file extended), so an exported session can be dropped into
a jsondir store, read by a person, or imported anywhere.

What a copy keeps: every scope, session (with its policy), message (role,
content, image parts, name, tool calls, tool call id, timestamp, metadata, token
count, in order), state document (data; versions restart at 1), memory (content, source
session, metadata, creation time) and audit event (with its time). What it
cannot keep through the Store protocol: message, memory and audit ids (the
target draws its own), session creation times, memory ``updated_at``, LLM
usage rows (only their totals are readable), and the prompt archive (recorded
turns' recipes and superseded state versions: they name message ids the
target draws anew).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeGuard, runtime_checkable

from engram import scopes
from engram.agent_state import AGENT_STATE_KIND
from engram.compaction.state import STATE_KIND
from engram.errors import ConfigError, CorruptedData, ImportFormatError
from engram.idempotency import RECORD, without_record
from engram.intake.validation import build_message
from engram.memories.budget import PENDING_KIND
from engram.memories.ending import LIFECYCLE_KIND
from engram.models import JSON, Message, NewMessage, SessionInfo, StateRecord
from engram.sections.tool_cache import TOOL_CACHE_KIND
from engram.store import open_store
from engram.store.base import MAX_PAGE, Store
from engram.store.jsondir.document import (
    FORMAT,
    build_document,
    document_history,
    document_info,
    document_states,
    parse_time,
)
from engram.tokens import count_new, storage_counter

#: State kinds tried on stores that cannot list their states: every kind Engram writes.
KNOWN_STATE_KINDS = (STATE_KIND, AGENT_STATE_KIND, TOOL_CACHE_KIND, LIFECYCLE_KIND, PENDING_KIND)
#: Messages read or written per batch while copying.
BATCH = MAX_PAGE


@runtime_checkable
class StateLister(Protocol):
    """Optional ability: list every state document of a session."""

    def list_states(self, scope: str, session: str) -> list[StateRecord]:
        """Every state document of the session."""
        ...


def can_list_states(store: object) -> TypeGuard[StateLister]:
    """True when ``store`` can list a session's states (else known kinds are probed)."""
    return callable(getattr(store, "list_states", None))


def session_states(store: Store, scope: str, session: str) -> list[StateRecord]:
    """Every state of the session the store can tell about, sorted by kind."""
    if can_list_states(store):
        return sorted(store.list_states(scope, session), key=lambda s: s.kind)
    found = [store.load_state(scope, session, kind) for kind in KNOWN_STATE_KINDS]
    return sorted((s for s in found if s is not None), key=lambda s: s.kind)


def all_messages(store: Store, scope: str, session: str) -> list[Message]:
    """The whole history of a session, oldest first, read page by page."""
    out: list[Message] = []
    after: int | None = None
    while True:
        batch = store.page(scope, session, after_id=after, limit=BATCH)
        out.extend(batch)
        if len(batch) < BATCH:
            return out
        after = batch[-1].id


def export_session(store: Store, scope: str, session: str) -> JSON:
    """The session as a jsondir document (see :mod:`engram.store.jsondir.document`).

    Raises:
        SessionNotFound: no such session in ``scope``.
    """
    from engram.errors import SessionNotFound

    info = store.get_session(scope, session)
    if info is None:
        raise SessionNotFound(f"no session {session!r} in scope {scope!r}")
    messages = [  # an idempotency key belongs to this store's requests, not to the document
        dataclasses.replace(m, metadata=without_record(m.metadata)) if RECORD in m.metadata else m
        for m in all_messages(store, scope, session)
    ]
    return build_document(info, messages, session_states(store, scope, session))


def _new_message(entry: Mapping[str, Any], where: str) -> tuple[NewMessage, int | None]:
    """A validated NewMessage and its stored token count (None when the document has none).

    The same checks as ``Session.add`` (role, content, name, tool calls, sizes).
    """
    try:
        if not isinstance(entry, Mapping):
            raise TypeError("a history entry must be an object")
        stamp = parse_time(entry.get("created_at", entry.get("timestamp")), f"{where} time")
        tokens = entry.get("token_count")
        parts = entry.get("parts")  # a message with images: its list content, whole
        metadata = entry.get("metadata")
        if isinstance(metadata, Mapping):  # a jsondir file holds idempotency records: not data
            metadata = without_record(metadata)
        message = build_message(
            entry.get("role"),
            entry.get("content") if parts is None else parts,
            name=entry.get("name"),
            tool_calls=entry.get("tool_calls"),
            tool_call_id=entry.get("tool_call_id"),
            created_at=stamp,
            metadata=metadata,
        )
        return message, (int(tokens) if tokens is not None else None)
    except (TypeError, ValueError, CorruptedData) as exc:  # InvalidMessage is a ValueError
        raise ImportFormatError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class PreparedDocument:
    """A session document parsed, validated and counted: ready to write, nothing written yet."""

    info: SessionInfo
    messages: list[NewMessage]
    tokens: list[int]
    states: list[StateRecord]
    #: Messages of the document its session already held (see :func:`unseen`).
    skipped: int = 0


def prepare_document(doc: Mapping[str, Any], *, scope: str | None = None) -> PreparedDocument:
    """Parse and check one session document (export_session, jsondir, agent runtime).

    A missing ``token_count`` is counted exactly. ``scope`` overrides the
    document's scope (agent-runtime files have none: they go to ``"default"``).

    Raises:
        ImportFormatError: the document is malformed.
    """
    if not isinstance(doc, Mapping):
        raise ImportFormatError("a session document must be a JSON object")
    body = dict(doc)
    body.setdefault("scope", "default")
    if scope is not None:
        body["scope"] = scope
    now = datetime.now(UTC).isoformat()
    body.setdefault("created_at", now)
    body.setdefault("updated_at", now)
    try:
        info = document_info(body, where="document")
        history = document_history(body, where="document")
        states = document_states(body, where="document")
    except CorruptedData as exc:
        raise ImportFormatError(str(exc)) from None
    parsed = [_new_message(e, f"recent_history[{i}]") for i, e in enumerate(history)]
    counter = storage_counter()
    tokens = [t if t is not None else count_new(counter, m) for m, t in parsed]
    return PreparedDocument(info, [m for m, _ in parsed], tokens, states)


#: What makes two messages the same one for an import: everything but ids, tokens and metadata.
Identity = str


def identity(message: Message | NewMessage) -> Identity:
    """The message as an import compares it: role, text, parts, name, tool fields and time."""
    return json.dumps(
        [
            message.role,
            message.content,
            message.parts,
            message.name,
            message.tool_calls,
            message.tool_call_id,
            message.created_at.astimezone(UTC).isoformat(),
        ],
        sort_keys=True,
        ensure_ascii=True,
    )


def unseen(
    store: Store, prepared: PreparedDocument, held: dict[tuple[str, str], Counter[Identity]]
) -> PreparedDocument:
    """The document less the messages its session already holds: a re-import adds nothing.

    A message is held when the session has one with the same :func:`identity`
    (each stored message accounts for one message of the document). Into a
    session that exists, only the new messages go, after its own: its policy
    and states stay as they are. ``held`` keeps each session's identities
    across the documents of one import (new messages included).
    """
    info = prepared.info
    where = (info.scope, info.id)
    existing = store.get_session(info.scope, info.id)
    if where not in held:
        stored = all_messages(store, info.scope, info.id) if existing is not None else []
        held[where] = Counter(identity(m) for m in stored)
    unmatched = Counter(held[where])  # each held message matches one of the document
    keep: list[int] = []
    for index, message in enumerate(prepared.messages):
        key = identity(message)
        if unmatched[key] > 0:
            unmatched[key] -= 1
        else:
            keep.append(index)
    held[where].update(identity(prepared.messages[i]) for i in keep)  # a later document sees them
    if existing is None and len(keep) == len(prepared.messages):
        return prepared
    return PreparedDocument(
        dataclasses.replace(info, policy=None) if existing is not None else info,
        [prepared.messages[i] for i in keep],
        [prepared.tokens[i] for i in keep],
        prepared.states if existing is None else [],
        skipped=len(prepared.messages) - len(keep),
    )


def check_target(store: Store, prepared: PreparedDocument, *, allow_existing: bool = False) -> None:
    """Refuse to import into a session that already has messages (unless ``allow_existing``)."""
    info = prepared.info
    existing = store.get_session(info.scope, info.id)
    if existing is not None and existing.message_count and not allow_existing:
        raise ConfigError(
            f"session {info.id!r} in scope {info.scope!r} already has "
            f"{existing.message_count} messages; import into an empty session"
        )


def write_document(
    store: Store, prepared: PreparedDocument, *, allow_existing: bool = False
) -> SessionInfo:
    """Write a prepared document: messages in order (they get the target's ids), then states."""
    check_target(store, prepared, allow_existing=allow_existing)
    info = prepared.info
    store.ensure_session(info.scope, info.id, policy=info.policy)
    for start in range(0, len(prepared.messages), BATCH):
        store.append(
            info.scope,
            info.id,
            prepared.messages[start : start + BATCH],
            prepared.tokens[start : start + BATCH],
        )
    for state in prepared.states:
        current = store.load_state(info.scope, info.id, state.kind)
        store.save_state(
            info.scope,
            info.id,
            state.kind,
            state.data,
            expected_version=current.version if current is not None else 0,
        )
    result = store.get_session(info.scope, info.id)
    assert result is not None
    return result


def import_document(
    store: Store, doc: Mapping[str, Any], *, scope: str | None = None, allow_existing: bool = False
) -> SessionInfo:
    """Check, then write, one session document; states are saved at version 1.

    Raises:
        ImportFormatError: the document is malformed; nothing was written.
        ConfigError: the target session already has messages (unless
            ``allow_existing``, which appends after them).
    """
    return write_document(store, prepare_document(doc, scope=scope), allow_existing=allow_existing)


@dataclass
class CopyReport:
    """What :func:`copy_store` copied."""

    scopes: int = 0
    sessions: int = 0
    messages: int = 0
    states: int = 0
    memories: int = 0
    audit_events: int = 0
    skipped: list[str] = field(default_factory=list)
    #: The two stores' URLs (passwords masked), when copied by :func:`copy_store_url`.
    source: str = ""
    target: str = ""


Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: called after each session and at the end of each scope."""


def copy_store(src: Store, dst: Store, progress: Progress | None = None) -> CopyReport:
    """Copy every scope, session, message, state, memory and audit event from ``src`` to ``dst``.

    Each session is imported with :func:`import_document` (one atomic append
    per batch of messages); a session that already has messages in ``dst`` is
    an error, so a copy is never silently merged into existing data.
    """
    if src is dst:
        raise ConfigError("copy_store needs two different stores")
    report = CopyReport()
    for scope in src.list_scopes():
        report.scopes += 1
        sessions = list(scopes.all_sessions(src, scope))
        for done, info in enumerate(sessions, start=1):
            doc = export_session(src, scope, info.id)
            import_document(dst, doc)
            report.sessions += 1
            report.messages += len(doc["recent_history"])
            report.states += len(doc["states"])
            if progress is not None:
                progress(f"{scope}/{info.id}", done, len(sessions))
        for memory in src.list_memories(scope):
            dst.add_memory(
                scope,
                memory.content,
                source_session=memory.source_session,
                metadata=memory.metadata,
                created_at=memory.created_at,
            )
            report.memories += 1
        # Oldest first, so the target's audit ids keep the source's order.
        events = list(reversed(src.list_audit(scope, limit=MAX_PAGE)))
        if len(events) == MAX_PAGE:
            report.skipped.append(f"{scope}: only the newest {MAX_PAGE} audit events were copied")
        for event in events:
            dst.add_audit(scope, {k: v for k, v in event.items() if k != "id"})
            report.audit_events += 1
    return report


def copy_store_url(source: str, target: str, progress: Progress | None = None) -> CopyReport:
    """Open the stores at two URLs and :func:`copy_store` the first into the second.

    Raises:
        ConfigError: the two URLs are the same, or one cannot be opened.

    """
    if source == target:
        raise ConfigError("the source and target stores are the same URL")
    src = open_store(source)
    try:
        dst = open_store(target)
        try:
            report = copy_store(src, dst, progress=progress)
            report.source, report.target = src.url, dst.url
            return report
        finally:
            dst.close()
    finally:
        src.close()


__all__ = [
    "FORMAT",
    "CopyReport",
    "StateLister",
    "can_list_states",
    "copy_store",
    "copy_store_url",
    "export_session",
    "import_document",
    "session_states",
    "unseen",
]
