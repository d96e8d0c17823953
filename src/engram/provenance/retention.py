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
covered it (:func:`forget_covering`): their text came from it.
"""

from __future__ import annotations

import logging

from engram.errors import StoreError
from engram.provenance.recipe import recipe_refs
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
