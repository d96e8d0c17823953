"""Edit and regenerate on a session: the verbs that remove messages, each with its receipt.

A mixin of :class:`engram.session.Session` (the handle stays small): drop or
replace the last answer, pop the newest item, edit a message and continue from
it, delete one message, clear the session. Every one goes through
:mod:`engram.forgetting`, which follows what was made from the messages and
writes the receipt to the audit trail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from engram import edits, forgetting, idempotency
from engram.errors import InvalidQuery, MessageNotFound
from engram.intake.validation import build_message
from engram.models import Message, NewMessage
from engram.policy import Policy
from engram.receipts import Receipt
from engram.runtime import Runtime
from engram.store import Store
from engram.store.base import MAX_PAGE

#: Newest messages scanned for the tool calls a new tool result answers, and
#: around a deletion for the tool group it belongs to.
TOOL_CALL_LOOKBACK = 64


class EditVerbs:
    """The deleting verbs of a session (mixed into :class:`engram.session.Session`)."""

    runtime: Runtime
    scope: str
    id: str
    _store: Store

    @property
    def policy(self) -> Policy:
        """The session's policy (the session's own)."""
        raise NotImplementedError

    def message(self, message_id: int) -> Message:
        """One message of the scope (the session's own)."""
        raise NotImplementedError

    def add_checked(self, batch: list[NewMessage]) -> list[Message]:
        """Store messages already checked (the session's own)."""
        raise NotImplementedError

    def pop_answer(self) -> list[Message]:
        """Delete the last answer: every message after the newest user message (regenerate).

        The assistant's final answer goes with the tool rounds that led to it.
        With no user message among the last ``TOOL_CALL_LOOKBACK`` messages,
        only the newest message (with its tool group) goes. Returns the
        deleted messages, oldest first ([] when the newest message is the
        user's). Audited; see :mod:`engram.edits`.
        """
        recent = self._store.tail(self.scope, self.id, limit=TOOL_CALL_LOOKBACK)
        users = [i for i, m in enumerate(recent) if m.role == "user"]
        # No user message in reach (an agent's own log): only the newest answer goes.
        answer = recent[users[-1] + 1 :] if users else recent[-1:]
        return list(self._delete([m.id for m in answer], "pop_answer").messages)

    def replace_answer(self, content: str, *, metadata: Mapping[str, Any] | None = None) -> Message:
        """Replace the last answer with ``content``; the new message names those it replaces.

        Raises:
            InvalidMessage: the new answer would be refused (nothing is deleted then).
            MessageNotFound: there is no answer after the newest user message.

        """
        new = build_message("assistant", content, metadata=metadata)
        gone = self.pop_answer()
        if not gone:
            raise MessageNotFound(f"no answer to replace in session {self.id!r}")
        replaced = dataclasses.replace(
            new, metadata={**new.metadata, "replaces": [m.id for m in gone]}
        )
        return self.add_checked([replaced])[0]

    def pop_item(self) -> Message | None:
        """Delete the newest message and return it (None when empty): the Agents SDK's verb."""
        newest = self._store.tail(self.scope, self.id, limit=1)
        gone = self._delete([m.id for m in newest], "pop_item", group=False).messages
        return gone[0] if gone else None

    def edit(self, message_id: int, content: str | Sequence[Any]) -> Message:
        """Edit a message and continue from it (the edited message is the newest).

        The message and every later one are deleted, and the new text is
        stored as a new message with ``metadata["edited_from"]`` set to the
        old id; the caller then asks for the next answer. New text for a
        message with images keeps its images (after the text); a list of
        parts replaces everything.

        Raises:
            MessageNotFound: no such message in this session.
            InvalidQuery: the message holds tool calls or is a tool result.
            InvalidMessage: the new text would be refused (nothing is deleted then).

        """
        old = self.message(message_id)
        if old.session != self.id:
            raise MessageNotFound(f"no message {message_id} in session {self.id!r}")
        if old.tool_calls or old.role == "tool":
            raise InvalidQuery(f"message {message_id}: tool calls and results cannot be edited")
        if isinstance(content, str) and old.parts:
            images = [part for part in old.parts if part.get("type") != "text"]
            content = [{"type": "text", "text": content}, *images]
        new = build_message(
            old.role,
            content,
            name=old.name,
            metadata={**idempotency.without_record(old.metadata), "edited_from": old.id},
        )
        later = [old.id]
        while page := self._store.page(self.scope, self.id, after_id=later[-1], limit=MAX_PAGE):
            later += [m.id for m in page]
        self._delete(later, "edit", group=False, replaced=old.id)
        return self.add_checked([new])[0]

    def delete_message(self, message_id: int, *, rebuild: bool = False) -> Receipt:
        """Forget one message (a tool call with its results) and what was made from it.

        The receipt names the removed messages and every derived thing (summary,
        important data, agent state, tool cache, memories, vectors, index rows)
        with what happened to it. ``rebuild`` rebuilds the summary and memories
        before returning (else the summary at the next turn; see
        :mod:`engram.forgetting`).

        Raises:
            MessageNotFound: no such message in this session.

        """
        target = self.message(message_id)
        if target.session != self.id:
            raise MessageNotFound(f"no message {message_id} in session {self.id!r}")
        return self._delete([target.id], "delete", rebuild=rebuild)

    def clear(self, *, rebuild: bool = False) -> Receipt:
        """Forget every message and state of the session (the Agents SDK's ``clear_session``).

        The session (empty) and its stored policy are kept; memories made from
        it go. Returns the receipt (``message_count``: how many messages went).
        """
        return forgetting.clear(self.runtime, self.scope, self.id, rebuild=rebuild)

    def delete(self) -> Receipt:
        """Delete the session with everything it holds (admin); the receipt.

        Unlike :meth:`clear`, the session and its policy go too. Memories made
        from it stay (the receipt names them); ``receipt.counts`` says how many
        ``sessions`` (0 when there was none) and ``messages`` went.
        """
        return forgetting.delete_session(self.runtime, self.scope, self.id)

    def _delete(
        self,
        ids: Sequence[int],
        action: str,
        *,
        group: bool = True,
        rebuild: bool = False,
        **extra: object,
    ) -> Receipt:
        if not ids:
            return Receipt(action, self.scope, self.id)
        if group:
            near = self._store.tail(
                self.scope, self.id, limit=TOOL_CALL_LOOKBACK, before_id=min(ids)
            ) + self._store.page(
                self.scope, self.id, after_id=min(ids) - 1, limit=TOOL_CALL_LOOKBACK
            )
            ids = edits.with_tool_group(near, ids)
        return forgetting.forget_messages(
            self.runtime, self.scope, self.id, ids, action=action, policy=self.policy,
            rebuild=rebuild, **extra,
        )  # fmt: skip
