"""One request's messages against the session: what to store, what to replace, what to replay.

Runs in a worker thread while the request holds its session's turn
(:mod:`engram.proxy.serial`), so nothing else writes the session meanwhile.
Everything is checked before the first write: a refused request stores,
replaces and bills nothing.

* The list is aligned with the stored history (:func:`engram.proxy.align.align`):
  only what is not stored yet is stored.
* **Retries.** A request with an ``Idempotency-Key`` seen before on this
  session gets that request's stored answer back (the same key with other
  messages is refused, naming the key: the library's rule, see
  :mod:`engram.idempotency`; the request's new messages are stored with the
  key, its answer with :func:`answer_key` of it). Without a key, a request that repeats
  the newest turn (its question again, nothing new) within the retry window
  (60 s by default) of that turn's answer is a retry and gets the stored
  answer back, with no upstream call. Past the window, or marked as a first
  attempt (the official SDKs send ``x-stainless-retry-count: 0`` with a first
  attempt, 1 and up with their retries), it is a new request: a list with
  history regenerates the answer (the old one is replaced), a new-only list is
  the same question asked again.
* **Edits.** A list that disagrees with the history after a point (an earlier
  turn edited or regenerated) replaces every stored message after that point,
  through the forgetting path (:func:`engram.forgetting.forget_messages`, action
  ``proxy_edit``): what was made from the replaced messages follows, and the
  audit entry carries the receipt. The deletion and the new messages are one
  transaction.
* An answer that was cut (the client left mid-stream) is never replayed: the
  same turn again replaces it with a new answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engram import forgetting, idempotency
from engram.errors import IdempotencyConflict, InvalidMessage
from engram.intake.validation import build_message, message_fields
from engram.models import JSON, Message, NewMessage
from engram.proxy.align import (
    Alignment,
    Kind,
    Print,
    Visible,
    align,
    fingerprint,
    visible,
)
from engram.proxy.budget import Sizes, turn_tokens
from engram.session import Session
from engram.store.grouping import Atomic
from engram.tokens import TokenCounter

#: Metadata key of an answer the client stopped reading before its end.
CUT_KEY = "cut"
#: ``action`` of the audit entry when a client's list replaces stored messages.
EDIT_ACTION = "proxy_edit"
#: Most stored messages read back to align a long list.
MAX_READ = 20_000
#: Rows of the first read (most requests carry one or two new messages).
FIRST_READ = 16
_PAGE = 1000


def answer_key(key: str) -> str:
    """The idempotency key the answer of a request with ``key`` is stored with."""
    return "answer:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]


@dataclass(frozen=True, slots=True)
class Retry:
    """What a request says about being a retry.

    Attributes:
        key: Its Idempotency-Key, or None.
        window: Seconds after an answer during which a repeat is a retry (0: never).
        first_attempt: The client marked it as its first attempt.
    """

    key: str | None
    window: float
    first_attempt: bool = False

    @property
    def answer_key(self) -> str | None:
        """The key its answer is stored with (None without a key)."""
        return answer_key(self.key) if self.key else None


@dataclass(frozen=True, slots=True)
class Plan:
    """What a request does.

    Attributes:
        replay: A stored answer to send back as it is; nothing else happens.
        stored: Messages of the request stored.
        replaced: Stored messages the request's list replaced (an edit).
    """

    replay: Message | None = None
    stored: int = 0
    replaced: int = 0


#: Writes a plan: (ids of stored messages replaced, messages to store, key) -> (stored, replaced).
Writer = Callable[[list[int], list[JSON], "str | None"], tuple[int, int]]


def plan_turn(
    session: Session,
    messages: Sequence[Mapping[str, Any]],
    retry: Retry,
    sizes: Sizes,
    counter: TokenCounter,
    ours: Callable[[str], bool],
    *,
    write: Writer | None = None,
) -> Plan:
    """Align the request's non-system ``messages`` with the session; store what is new.

    ``ours(name)`` tells Engram's own tools (their rounds are hidden from clients).
    ``write`` replaces the session's write (a turn that stores nothing keeps
    its messages in a scratch instead).

    Raises:
        InvalidMessage: a message cannot be read or stored; nothing is written.
        IdempotencyConflict: the Idempotency-Key stored other messages before.
        PromptTooLarge: the new turn cannot fit the budget; nothing is written.
    """
    raw = [dict(m) for m in messages if not _empty_answer(m)]
    client = _read(raw)
    rows, whole = _read_back(
        session, len(client) + 2, idempotency.LOOKBACK if retry.key else 0, ours
    )
    if retry.key:
        earlier = _keyed(rows, client, retry.key)
        if earlier is not None:
            return Plan(replay=earlier)
    prints = [fingerprint(m) for m in client]
    shown = visible(rows, ours)
    found = align(prints, shown)
    while found.unmatched and found.history and not whole and len(rows) < MAX_READ:
        # A list with history that agrees with nothing read: it starts further back
        # (an edit of an early turn); read on until it is found, or the start.
        rows, whole = _older(session, rows)
        shown = visible(rows, ours)
        found = align(prints, shown)
    if found.kind is Kind.REPEAT and _is_retry(found, retry):
        return Plan(replay=found.answer)
    through, new = _what_stays(found, shown, len(client))
    kept = rows if through is None else [m for m in rows if m.id <= through]
    sizes.check_turn(turn_tokens(counter, _current_turn(kept, [client[i] for i in new])))
    gone_ids = [] if through is None else [m.id for m in rows if m.id > through]
    batch = [raw[i] for i in new]
    stored, replaced = (write or _writer(session))(gone_ids, batch, retry.key)
    return Plan(stored=stored, replaced=replaced)


def _writer(session: Session) -> Writer:
    """The session's write: the replaced messages go and the new ones come, in one transaction.

    The replaced messages are forgotten like a deletion: the audit entry carries the receipt.
    """
    store = session.runtime.store

    def write(gone_ids: list[int], batch: list[JSON], key: str | None) -> tuple[int, int]:
        with store.atomic() if isinstance(store, Atomic) else nullcontext():
            gone = (
                forgetting.forget_messages(
                    session.runtime,
                    session.scope,
                    session.id,
                    gone_ids,
                    action=EDIT_ACTION,
                    policy=session.policy,
                ).message_ids
                if gone_ids
                else ()
            )
            added = session.add_many(batch, idempotency_key=key) if batch else []
        return len(added), len(gone)

    return write


def _what_stays(
    found: Alignment, shown: Sequence[Visible], size: int
) -> tuple[int | None, tuple[int, ...]]:
    """(id of the last stored message kept, None: all; positions of the client's to store)."""
    if found.kind is Kind.DIVERGE:
        return (found.after.id if found.after else 0), found.new
    if found.kind is not Kind.REPEAT:
        return None, found.new
    assert found.answer is not None
    if found.history or found.answer.metadata.get(CUT_KEY):
        # A regenerate: the answer goes, with Engram's own rounds before it.
        start = len(shown)
        while start and shown[start - 1].message.role == "assistant":
            start -= 1
        return (shown[start - 1].message.id if start else 0), ()
    return None, tuple(range(size))  # the same question asked again


def _is_retry(found: Alignment, retry: Retry) -> bool:
    """Whether a repeat of the newest turn is a retry of the request that made it."""
    answer = found.answer
    if answer is None or answer.metadata.get(CUT_KEY):
        return False
    if retry.key is not None or retry.first_attempt:  # a new key, or a first attempt
        return False
    age = (datetime.now(UTC) - answer.created_at).total_seconds()
    return age <= retry.window


def _keyed(rows: Sequence[Message], client: Sequence[NewMessage], key: str) -> Message | None:
    """The answer an earlier request with ``key`` stored (None: go on with the request).

    Raises:
        IdempotencyConflict: that request stored other messages than this one ends with.
    """
    recent = rows[-idempotency.LOOKBACK :]
    asked = [m for m in recent if idempotency.key_of(m) == key]
    if asked:
        record = asked[0].metadata.get(idempotency.RECORD) or {}
        mine = client[-len(asked) :] if len(client) >= len(asked) else None
        if mine is None or idempotency.fingerprint(list(mine)) != record.get("fingerprint"):
            raise IdempotencyConflict(
                f"Idempotency-Key {key!r} was already used on this session for other "
                "messages: a retry must send the same messages, a new request needs a new key",
                key=key,
            )
    answered = answer_key(key)
    answers = [
        m
        for m in recent
        if m.role == "assistant"
        and idempotency.key_of(m) == answered
        and not m.metadata.get(CUT_KEY)
    ]
    return answers[-1] if answers else None


def _read(raw: Sequence[Mapping[str, Any]]) -> list[NewMessage]:
    """The client's messages as the library reads them (text parts joined by its rule).

    Raises:
        InvalidMessage: naming the message's position and field.
    """
    out = []
    for index, item in enumerate(raw):
        fields = message_fields(item, index, ignore_unknown=True)
        try:
            out.append(build_message(fields.pop("role"), fields.pop("content"), **fields))
        except InvalidMessage as exc:
            raise InvalidMessage(f"message #{index}: {exc}") from None
    return out


def _read_back(
    session: Session, want: int, at_least: int, ours: Callable[[str], bool]
) -> tuple[list[Message], bool]:
    """The newest stored messages, enough to hold ``want`` visible ones (or all), oldest first.

    Also says whether they are the whole history.
    """
    limit = min(max(FIRST_READ, at_least, 2 * want), _PAGE)
    rows = session.runtime.store.tail(session.scope, session.id, limit=limit)
    whole = len(rows) < limit
    while not whole and len(rows) < MAX_READ and len(visible(rows, ours)) < want:
        rows, whole = _older(session, rows)
    return rows, whole


def _older(session: Session, rows: list[Message]) -> tuple[list[Message], bool]:
    """``rows`` with a page of older messages before them, and whether that reached the start."""
    if not rows:
        return rows, True
    store = session.runtime.store
    older = store.tail(session.scope, session.id, limit=_PAGE, before_id=rows[0].id)
    return older + rows, len(older) < _PAGE


def _current_turn(kept: Sequence[Message], new: Sequence[NewMessage]) -> list[Message | NewMessage]:
    """The messages of the turn the prompt must hold whole: from the newest user message on."""
    combined: list[Message | NewMessage] = [*kept, *new]
    for index in range(len(combined) - 1, -1, -1):
        if combined[index].role == "user":
            return combined[index:]
    return list(new)


def _empty_answer(message: Mapping[str, Any]) -> bool:
    """An assistant message with nothing in it (no text, no call): Engram stores none."""
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return False
    content = message.get("content")
    return content is None or content == "" or content == []


def client_prints(messages: Sequence[Mapping[str, Any]]) -> list[Print]:
    """Fingerprints of a client's messages (for tests and other fronts)."""
    return [fingerprint(m) for m in _read([m for m in messages if not _empty_answer(m)])]
