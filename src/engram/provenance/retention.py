"""What the prompt archive keeps, and pruning to it.

The rule, per session:

* the recipes of the newest :data:`KEEP_TURNS` recorded turns are kept (the
  prompt log keeps totals over every turn);
* a superseded state version is kept while a kept recipe names it, and the
  newest :data:`KEEP_VERSIONS` superseded versions of each kind are kept
  whatever names them (a turn being recorded may name one);
* a text (system prompt, tools, views...) is kept while a kept recipe names it.

Pruning runs when a session's turn number reaches a multiple of
:data:`PRUNE_EVERY`: one read of the kept recipes every 1,000 turns, about one
recipe read per turn (so up to 2,000 recipes are stored just before a
prune). A recipe that names something pruned replays as incomplete and says
what is missing; it never guesses.

A deleted or edited message also takes with it the superseded summaries that
covered it (:func:`forget_covering`): their text came from it; and a forgotten
message or memory takes the archived texts that quote it (:func:`forget_quoting`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from engram.errors import StoreError
from engram.provenance.recipe import recipe_refs
from engram.scopes import all_sessions
from engram.store.base import MAX_PAGE, VERSIONED_KINDS, PromptArchive, Store, archives_prompts

log = logging.getLogger(__name__)

#: Recipes kept per session (the newest).
KEEP_TURNS = 1000
#: Superseded versions of each state kind kept whatever names them.
KEEP_VERSIONS = 8
#: Pruning runs when a turn number is a multiple of this (it reads the kept recipes).
PRUNE_EVERY = 1000


def due(number: int) -> bool:
    """Whether reaching turn or version ``number`` calls for pruning."""
    return number > 0 and number % PRUNE_EVERY == 0


def prune(store: Store, scope: str, session: str, *, keep_turns: int = KEEP_TURNS) -> None:
    """Apply the retention rule to one session (a failure is logged, never raised)."""
    archive: object = store
    if not archives_prompts(archive):
        return
    try:
        _prune(store, archive, scope, session, keep_turns)
    except StoreError as exc:
        log.warning("prompt archive of %s/%s not pruned: %s", scope, session, exc)


def _prune(store: Store, archive: PromptArchive, scope: str, session: str, keep: int) -> None:
    newest = archive.list_prompts(scope, session, limit=1, newest=True)
    before = newest[0].turn - keep + 1 if newest else 1
    versions: dict[str, set[int]] = {kind: set() for kind in VERSIONED_KINDS}
    texts: set[str] = set()
    after = before - 1
    while page := archive.list_prompts(scope, session, after=after, limit=MAX_PAGE):
        for record in page:
            named, keys = recipe_refs(record.data)
            for kind, version in named:
                versions.setdefault(kind, set()).add(version)
            texts |= keys
        after = page[-1].turn
    for kind in VERSIONED_KINDS:
        current = store.load_state(scope, session, kind)
        if current is not None:
            low = max(1, current.version - KEEP_VERSIONS)
            versions[kind].update(range(low, current.version))
    archive.prune_prompts(
        scope, session, before_turn=max(1, before), keep_versions=versions, keep_texts=texts
    )


def forget_covering(store: Store, scope: str, session: str, kind: str, first_id: int) -> int:
    """Drop the superseded ``kind`` versions whose watermark reaches ``first_id``.

    Called when messages from ``first_id`` on were deleted: a summary folded
    up to a watermark at or past that id may hold their text. Returns how many
    versions were dropped (a failure is logged, and counts none).
    """
    archive: object = store
    if not archives_prompts(archive):
        return 0
    try:
        return _forget(store, archive, scope, session, kind, first_id)
    except StoreError as exc:
        log.warning("summaries of deleted messages of %s/%s not dropped: %s", scope, session, exc)
        return 0


def _forget(
    store: Store, archive: PromptArchive, scope: str, session: str, kind: str, first_id: int
) -> int:
    tops = {k: store.load_state(scope, session, k) for k in VERSIONED_KINDS | {kind}}
    current = tops[kind]
    if current is None:
        return 0
    doomed: set[int] = set()
    for version in range(1, current.version):
        record = archive.load_state_version(scope, session, kind, version)
        watermark = record.data.get("watermark") if record is not None else None
        if isinstance(watermark, int) and watermark >= first_id:
            doomed.add(version)
    if doomed:
        keep = {k: set(range(1, r.version)) for k, r in tops.items() if r is not None}
        keep[kind] -= doomed
        archive.prune_prompts(
            scope,
            session,
            before_turn=1,
            keep_versions=keep,
            keep_texts=_all_texts(archive, scope, session),
        )
    return len(doomed)


def _all_texts(archive: PromptArchive, scope: str, session: str) -> set[str]:
    """Every text the session's recipes name (all kept: nothing here prunes recipes)."""
    texts: set[str] = set()
    after = 0
    while page := archive.list_prompts(scope, session, after=after, limit=MAX_PAGE):
        for record in page:
            texts |= recipe_refs(record.data)[1]
        after = page[-1].turn
    return texts


#: Shortest text :func:`forget_quoting` looks for: a shorter one ("ok") holds nothing to
#: erase, and would take with it every recorded text that happens to contain it.
MIN_QUOTED = 8


def quoted_forms(text: str) -> list[str]:
    """How a forgotten ``text`` may stand in an archived text.

    As it is, with its spaces folded (a memory block), and escaped in JSON (a
    tool result, tools, a whole prompt).
    """
    folded = " ".join(text.split())
    forms = {text, folded, *(json.dumps(t, ensure_ascii=False)[1:-1] for t in (text, folded))}
    return sorted(form for form in forms if len(form) >= MIN_QUOTED)


def forget_quoting(store: Store, scope: str, sessions: Iterable[str], texts: Iterable[str]) -> int:
    """Drop the archived texts of ``sessions`` that quote one of ``texts``; how many went.

    Erasure reaches the prompt archive: a recorded memory block, tool round or
    view that held a forgotten message or memory goes, and the turns that named
    it replay as incomplete, saying what is missing. A failure is logged.
    """
    archive: object = store
    needles = [form for text in texts for form in quoted_forms(text)]
    if not needles or not archives_prompts(archive):
        return 0
    gone = 0
    for session in sessions:
        try:
            gone += _forget_quoting(store, archive, scope, session, needles)
        except StoreError as exc:
            log.warning("texts quoting what %s/%s forgot not dropped: %s", scope, session, exc)
    return gone


def forget_in_scope(store: Store, scope: str, texts: Iterable[str]) -> int:
    """:func:`forget_quoting` over every session of ``scope`` (a memory shows in all of them)."""
    sessions = [info.id for info in all_sessions(store, scope)]
    return forget_quoting(store, scope, sessions, list(texts))


def _forget_quoting(
    store: Store, archive: PromptArchive, scope: str, session: str, needles: list[str]
) -> int:
    named = _all_texts(archive, scope, session)
    if not named:
        return 0
    held = archive.prompt_texts(scope, session, named)
    doomed = {key for key, text in held.items() if any(n in text for n in needles)}
    if doomed:
        tops = {k: store.load_state(scope, session, k) for k in VERSIONED_KINDS}
        keep = {k: set(range(1, r.version)) for k, r in tops.items() if r is not None}
        archive.prune_prompts(
            scope, session, before_turn=1, keep_versions=keep, keep_texts=named - doomed
        )
    return len(doomed)
