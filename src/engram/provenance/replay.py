"""A recorded turn's prompt rebuilt from the store, and checked against its SHA-256.

The recipe (:mod:`.recipe`) names everything: the texts are read by key, the
sections rendered again from the state versions it names
(:func:`engram.sections.versions.render_state`), the window's messages read
by id. When a part is gone (a pruned version or text, a deleted message) the
replay says which and rebuilds nothing: it never guesses. A rebuilt prompt is
``verified`` when its canonical bytes hash to the recorded SHA-256; when not,
``mismatch`` is the index of the first message that differs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engram.context.shapes import SYSTEM_JOINER
from engram.models import JSON, Message, PromptRecord
from engram.provenance.digest import prompt_digest
from engram.provenance.recipe import recipe_refs, window_ids
from engram.sections.versions import render_state
from engram.store.base import MAX_PAGE, PromptArchive, Store


@dataclass(frozen=True, slots=True)
class Replay:
    """One recorded turn, rebuilt.

    Attributes:
        turn: The turn's number (from 1).
        record: The stored turn: its time, recipe and provider usage.
        messages: The prompt as rebuilt, or None when a part is missing.
        verified: The rebuilt prompt hashes to the recorded SHA-256.
        missing: What could not be found, one sentence each.
        mismatch: Index of the first message that differs from what was sent.
        tools: The tool schemas offered, when recorded and kept.
        sections: The head's parts: the system prompt and each section with
            its source (kind, version or memories shown).

    """

    turn: int
    record: PromptRecord
    messages: list[JSON] | None
    verified: bool
    missing: list[str] = field(default_factory=list)
    mismatch: int | None = None
    tools: list[JSON] | None = None
    sections: list[JSON] = field(default_factory=list)

    @property
    def recipe(self) -> JSON:
        """The stored recipe."""
        return self.record.data

    def to_dict(self) -> JSON:
        """Everything as plain JSON-ready data."""
        recipe = self.recipe
        return {
            "turn": self.turn,
            "at": self.record.at.isoformat(),
            "via": recipe.get("via"),
            "policy": recipe.get("policy"),
            "budget": recipe.get("budget"),
            "reserve": recipe.get("reserve"),
            "counter": recipe.get("counter"),
            "model": recipe.get("model"),
            "tokens": recipe.get("tokens"),
            "sha256": recipe.get("sha256"),
            "verified": self.verified,
            "missing": list(self.missing),
            "mismatch": self.mismatch,
            "messages": self.messages,
            "message_ids": window_ids(recipe),
            "sections": list(self.sections),
            "omitted": recipe.get("omitted", []),
            "notes": recipe.get("notes", []),
            "degraded": recipe.get("degraded"),
            "tools": self.tools,
            "usage": self.record.usage,
        }


def replay(
    store: Store, archive: PromptArchive, scope: str, session: str, record: PromptRecord
) -> Replay:
    """Rebuild ``record``, a turn of ``scope``/``session``, from ``store`` (module docstring)."""
    scope_session = (scope, session)
    recipe = record.data
    missing: list[str] = []
    texts = _texts(archive, scope_session, recipe, missing)
    tools = _loads(texts.get(recipe["tools"])) if recipe.get("tools") else None
    sections = _head_sections(recipe)
    if isinstance(recipe.get("verbatim"), str):
        rebuilt = _loads(texts.get(recipe["verbatim"]))
        messages = rebuilt if isinstance(rebuilt, list) else None
    else:
        head = _head(store, archive, scope_session, recipe, texts, missing)
        window = _window(store, scope_session, recipe, texts, missing)
        extra = _loads(texts.get(recipe["extra"])) if recipe.get("extra") else []
        messages = None if missing else [*head, *window, *(extra or [])]
    if messages is None:
        return Replay(record.turn, record, None, False, missing, None, tools, sections)
    digest, _, keys = prompt_digest(messages)
    verified = digest == recipe.get("sha256")
    mismatch = None if verified else _first_change(keys, recipe.get("keys") or [])
    return Replay(record.turn, record, messages, verified, missing, mismatch, tools, sections)


def _loads(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


def _texts(
    archive: PromptArchive, where: tuple[str, str], recipe: JSON, missing: list[str]
) -> dict[str, str]:
    keys = recipe_refs(recipe)[1]
    found = archive.prompt_texts(*where, keys)
    for key in sorted(keys - set(found)):
        missing.append(f"a text this prompt used (sha256 {key[:12]}…) was pruned")
    return found


def _head_sections(recipe: JSON) -> list[JSON]:
    out: list[JSON] = []
    for message in recipe.get("head") or ():
        for part in message:
            if "system" in part:
                out.append({"title": "system prompt", "kind": "system"})
                continue
            entry: JSON = {"title": part.get("section", "text"), "kind": part.get("kind")}
            if "version" in part:
                entry["version"] = part["version"]
            if "items" in part:
                entry["memories"] = [item[0] for item in part["items"]]
            out.append(entry)
    return out


def _head(
    store: Store,
    archive: PromptArchive,
    where: tuple[str, str],
    recipe: JSON,
    texts: Mapping[str, str],
    missing: list[str],
) -> list[JSON]:
    out: list[JSON] = []
    rendered: dict[tuple[str, int], dict[str, str]] = {}
    for message in recipe.get("head") or ():
        pieces: list[str] = []
        for part in message:
            key = part.get("system", part.get("text"))
            if isinstance(key, str):
                pieces.append(texts.get(key, ""))
                continue
            kind, version, title = str(part.get("kind")), int(part["version"]), part["section"]
            if (kind, version) not in rendered:
                record = archive.load_state_version(*where, kind, version)
                if record is None:
                    missing.append(f"version {version} of the {kind} state was pruned")
                    rendered[(kind, version)] = {}
                else:
                    shown = render_state(kind, record.data)
                    rendered[(kind, version)] = {s.title: s.render() for s in shown}
            text = rendered[(kind, version)].get(title)
            if text is None:
                if rendered[(kind, version)]:
                    missing.append(f"version {version} of the {kind} state has no {title!r}")
                text = ""
            pieces.append(text)
        out.append({"role": "system", "content": SYSTEM_JOINER.join(pieces)})
    return out


def _window(
    store: Store, where: tuple[str, str], recipe: JSON, texts: Mapping[str, str], missing: list[str]
) -> list[JSON]:
    ids = window_ids(recipe)
    stored = _messages(store, where, ids)
    out: list[JSON] = []
    for entry, message_id in zip(recipe.get("window") or (), ids, strict=True):
        if isinstance(entry, Mapping):
            view = _loads(texts.get(entry["shown"]))
            if view is not None:
                out.append(view)
            continue
        message = stored.get(message_id)
        if message is None:
            missing.append(f"message {message_id} was deleted")
            continue
        out.append(message.to_openai())
    return out


def _messages(store: Store, where: tuple[str, str], ids: list[int]) -> dict[int, Message]:
    """The stored messages among ``ids``, read in pages over their id range."""
    if not ids:
        return {}
    wanted, last = set(ids), max(ids)
    found: dict[int, Message] = {}
    after = min(ids) - 1
    while after < last:
        page = store.page(*where, after_id=after, limit=MAX_PAGE)
        found.update((m.id, m) for m in page if m.id in wanted)
        if len(page) < MAX_PAGE:
            break
        after = page[-1].id
    return found


def _first_change(keys: list[str], recorded: list[str]) -> int:
    for index, (a, b) in enumerate(zip(keys, recorded, strict=False)):
        if a != b:
            return index
    return min(len(keys), len(recorded))
