"""Recipes written with the prompt recorder's batches, and what the provider said.

The prompt recorder (:mod:`engram.prompt_log`) keeps each turn in memory as a
:class:`~engram.provenance.recipe.PendingTurn` and writes a session's turns in
one batch: :func:`write_turns` builds their recipes (the SHA-256 and the
canonical bytes are computed here, off the turn's path), appends them to the
archive, which numbers them, and prunes when a number calls for it
(:mod:`.retention`). A :class:`PromptTicket` stands for one recorded turn:
:meth:`PromptTicket.answered` passes on the usage the provider reported for
the answer (cached tokens), written with the next batch once the turn has its
number. Like the prompt log, this is a record: a failure is logged, never
raised into a turn.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from engram.errors import StoreError
from engram.models import JSON
from engram.provenance import retention
from engram.provenance.digest import PieceCache
from engram.provenance.recipe import PendingTurn, build_recipe
from engram.store.base import Store, archives_prompts

log = logging.getLogger(__name__)


class PromptTicket:
    """One recorded turn, before and after it is written (its number is then known)."""

    __slots__ = ("_note", "failed", "scope", "session", "turn")

    def __init__(
        self, scope: str, session: str, note: Callable[[PromptTicket, JSON], None]
    ) -> None:
        """A ticket of a turn of ``scope``/``session``; ``note`` queues its usage."""
        self.scope = scope
        self.session = session
        self.turn: int | None = None
        self.failed = False
        self._note = note

    def answered(self, usage: Mapping[str, Any] | None) -> None:
        """Record what the provider reported about the answer to this prompt.

        ``usage`` is the answer's ``usage`` object as the provider sent it:
        OpenAI Chat Completions (``prompt_tokens_details.cached_tokens``),
        Responses (``input_tokens_details.cached_tokens``) or Anthropic
        (``cache_read_input_tokens``). Nothing is recorded without one.
        """
        normalized = provider_usage(usage)
        if normalized is not None:
            self._note(self, normalized)


def provider_usage(usage: Mapping[str, Any] | None) -> JSON | None:
    """``{"prompt_tokens", "cached_tokens", "output_tokens"}`` from any provider's usage.

    ``prompt_tokens`` is every input token (Anthropic reports the cached and
    cache-written ones apart); ``cached_tokens`` those read from the
    provider's prompt cache (0 when it says none, None when it does not say).
    """
    if not isinstance(usage, Mapping):
        return None

    def number(value: Any) -> int | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return value if ok else None

    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        read = number(usage.get("cache_read_input_tokens")) or 0
        written = number(usage.get("cache_creation_input_tokens")) or 0
        total = (number(usage.get("input_tokens")) or 0) + read + written
        return {"prompt_tokens": total, "cached_tokens": read,
                "output_tokens": number(usage.get("output_tokens"))}  # fmt: skip
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    prompt = number(usage.get("prompt_tokens", usage.get("input_tokens")))
    if prompt is None:
        return None
    cached = number(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    output = number(usage.get("completion_tokens", usage.get("output_tokens")))
    return {"prompt_tokens": prompt, "cached_tokens": cached, "output_tokens": output}


def write_turns(
    store: Store,
    scope: str,
    session: str,
    turns: list[tuple[PendingTurn, PromptTicket]],
    cache: PieceCache | None = None,
) -> None:
    """Append the recipes of ``turns`` (in order) to the archive; number their tickets."""
    archive: object = store
    if not turns or not archives_prompts(archive):
        for _, ticket in turns:
            ticket.failed = True
        return
    texts: dict[str, str] = {}
    rows = []
    try:
        for pending, _ in turns:
            recipe, named = build_recipe(pending, cache)
            texts.update(named)
            rows.append((pending.at, recipe))
        numbers = archive.add_prompts(scope, session, rows, texts)
    except (StoreError, ValueError, TypeError) as exc:
        log.warning(
            "%d prompt recipe(s) of %s/%s not recorded: %s", len(turns), scope, session, exc
        )
        numbers = []
    if len(numbers) != len(turns):
        for _, ticket in turns:
            ticket.failed = True
        return
    for number, (_, ticket) in zip(numbers, turns, strict=True):
        ticket.turn = number
    if any(retention.due(n) for n in numbers):
        retention.prune(store, scope, session)


class UsageNotes:
    """Provider usage waiting for its turn's number, written with the recorder's batches."""

    def __init__(self) -> None:
        """No notes yet."""
        self._lock = threading.Lock()
        self._notes: list[tuple[PromptTicket, JSON]] = []

    def add(self, ticket: PromptTicket, usage: JSON) -> None:
        """Queue ``usage`` for ``ticket``'s turn."""
        with self._lock:
            self._notes.append((ticket, usage))

    def write(self, store: Store, scope: str | None = None, session: str | None = None) -> None:
        """Write the notes whose turn is numbered (of one session, or all)."""
        ready: dict[tuple[str, str], dict[int, JSON]] = {}
        with self._lock:
            waiting = []
            for ticket, usage in self._notes:
                mine = scope is None or (ticket.scope, ticket.session) == (scope, session)
                if mine and ticket.turn is not None:
                    ready.setdefault((ticket.scope, ticket.session), {})[ticket.turn] = usage
                elif not ticket.failed:
                    waiting.append((ticket, usage))
            self._notes = waiting
        archive: object = store
        if not ready or not archives_prompts(archive):
            return
        for (note_scope, note_session), usage_by_turn in ready.items():
            try:
                archive.set_prompt_usage(note_scope, note_session, usage_by_turn)
            except StoreError as exc:
                log.warning(
                    "provider usage of %s/%s not recorded: %s", note_scope, note_session, exc
                )

    def __len__(self) -> int:
        """Notes waiting."""
        with self._lock:
            return len(self._notes)
