"""The recipe of a recorded turn: what rebuilds its prompt, byte for byte. Pure code.

A recipe is a JSON document (format :data:`FORMAT`)::

    {"format": 1, "via": "library", "policy": "summary_buffer",
     "policy_settings": "<text key>", "budget": 8000, "reserve": 1000,
     "counter": "o200k_base", "model": "gpt-4o-mini",
     "head": [[part, ...], ...],          # the leading system message(s)
     "window": [41, 42, {"id": 43, "shown": "<text key>"}, ...],
     "extra": "<text key>" | null,        # messages sent after the context's
     "tools": "<text key>" | null,        # the tool schemas offered
     "tokens": 1234, "sha256": "...", "sizes": [...], "keys": [...],
     "turn_start": 7, "omitted": [...], "notes": [...], "degraded": null,
     "history": [120, 45000], "pending_compaction": false, "exact": true}

Each head message is its parts joined as the builder joins them (one part per
message, or every part in one message when the system prompt and sections
were merged). A part is the system prompt (``{"system": key}``), a section
rendered from a versioned state document (``{"section": title, "kind":
"compaction", "version": 7}``: rebuilt from that version), the memories
(``{"section": title, "kind": "memories", "items": [[id, updated_at], ...],
"text": key}``) or any other text (``{"text": key}``). A window entry is a
stored message's id (sent as stored) or, for one sent as a view (truncated,
shortened, a tool call left out), its id with the view as sent. A text key is
the SHA-256 of a text stored once per session beside the recipes; the policy,
the views, the extra messages and the tools are stored as canonical JSON text.
When what was sent does not begin with the context's messages, the whole
prompt is stored as one text (``"verbatim"``). ``sha256`` is the SHA-256 of
the prompt's canonical bytes (:mod:`.digest`); ``sizes`` and ``keys`` its
messages' byte sizes and short digests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from engram.context import Context, Section
from engram.context.shapes import SYSTEM_JOINER
from engram.models import JSON
from engram.provenance.digest import (
    Piece,
    PieceCache,
    canonical,
    piece,
    prompt_digest,
    text_key,
)

#: Format of the recipe document.
FORMAT = 1
#: How a turn was recorded.
VIA_LIBRARY = "library"
VIA_CHAT = "chat"
VIA_PROXY = "proxy"
VIA_REST = "rest"


class PendingTurn:
    """A turn recorded in memory, turned into a recipe when its batch is written.

    Attributes:
        ctx: The context the prompt was built from (its messages are not copied:
            they must not be changed once built); its ``provenance`` names the
            policy, the sections' sources and the system prompt asked for.
        sent: The messages sent, when not exactly ``ctx.messages`` (more after
            them, e.g. tool rounds not stored); None: ``ctx.messages``.
        tools: The tool schemas offered with the prompt, if any.
        via: Which interface recorded it (:data:`VIA_LIBRARY`...).
        at: When the turn was recorded (set by the recorder).

    """

    __slots__ = ("at", "ctx", "sent", "tools", "via")

    def __init__(
        self,
        ctx: Context,
        *,
        sent: Sequence[JSON] | None = None,
        tools: Sequence[JSON] | None = None,
        via: str = VIA_LIBRARY,
    ) -> None:
        """A turn of ``ctx``; see the class docstring for the rest."""
        self.ctx = ctx
        self.sent = sent
        self.tools = tools
        self.via = via
        self.at = _EPOCH


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Texts:
    """The texts a recipe names, by key."""

    __slots__ = ("texts",)

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def keep(self, text: str) -> str:
        """Store ``text`` with the recipe; returns its key."""
        key = text_key(text)
        self.texts[key] = text
        return key


def build_recipe(turn: PendingTurn, cache: PieceCache | None = None) -> tuple[JSON, dict[str, str]]:
    """The recipe of ``turn`` and the texts it names (by key).

    ``cache`` holds the canonical bytes of stored messages sent as stored, so
    a message is encoded once while it stays in the window.
    """
    ctx = turn.ctx
    origin = ctx.provenance
    sent: Sequence[JSON] = ctx.messages if turn.sent is None else turn.sent
    texts = _Texts()
    recipe: JSON = {
        "format": FORMAT,
        "via": turn.via,
        "policy": ctx.policy,
        "policy_settings": (
            texts.keep(canonical(origin.policy.to_dict()).decode()) if origin else None
        ),
        "budget": ctx.budget,
        "reserve": ctx.reserve,
        "counter": ctx.counter,
        "model": origin.model if origin else None,
        "tokens": ctx.tokens,
        "tools": texts.keep(canonical(list(turn.tools)).decode()) if turn.tools else None,
        "turn_start": ctx.turn_start,
        "omitted": [o.to_dict() for o in ctx.omitted],
        "notes": list(ctx.notes),
        "degraded": ctx.degraded,
        "history": [ctx.history.messages, ctx.history.tokens] if ctx.history else None,
        "pending_compaction": ctx.pending_compaction,
        "exact": ctx.exact,
    }
    count = len(ctx.messages)
    if turn.sent is not None and not _starts_with(sent, ctx.messages):
        recipe["verbatim"] = texts.keep(canonical(list(sent)).decode())
        pieces = None
    else:
        head = _head(ctx, texts)
        recipe["head"] = head
        recipe["window"] = window = _window(ctx, len(head), texts.keep)
        extra = list(sent[count:])
        recipe["extra"] = texts.keep(canonical(extra).decode()) if extra else None
        pieces = _pieces(sent, len(head), window, cache)
    recipe["sha256"], recipe["sizes"], recipe["keys"] = prompt_digest(sent, pieces)
    return recipe, texts.texts


def _pieces(
    sent: Sequence[JSON], start: int, window: list[Any], cache: PieceCache | None
) -> list[Piece]:
    """Each message sent as a piece, stored ones sent as stored read from ``cache``."""
    end = start + len(window)
    stored = [(e, m) for e, m in zip(window, sent[start:end], strict=True) if isinstance(e, int)]
    cached = iter(cache.pieces(stored) if cache is not None else [piece(m) for _, m in stored])
    out = [piece(m) for m in sent[:start]]
    out += [next(cached) if isinstance(e, int) else piece(m)
            for e, m in zip(window, sent[start:end], strict=True)]  # fmt: skip
    return out + [piece(m) for m in sent[end:]]


def _starts_with(sent: Sequence[JSON], messages: Sequence[JSON]) -> bool:
    return len(sent) >= len(messages) and all(
        a is b or a == b for a, b in zip(sent, messages, strict=False)
    )


def _head(ctx: Context, texts: _Texts) -> list[list[JSON]]:
    """The leading system messages as lists of parts."""
    system_shown = ctx.system_tokens > 0
    count = int(system_shown) + len(ctx.sections)
    if count == 0:
        return []
    origin = ctx.provenance
    offered = {s.title: s for s in origin.sections} if origin else {}
    system = origin.system if origin else None
    if origin is not None and origin.merge_system and count > 1:
        shown = ([system or ""] if system_shown else []) + [
            offered[t].render() if t in offered else "" for t in ctx.sections
        ]
        first = ctx.messages[0].get("content") if ctx.messages else None
        if first == SYSTEM_JOINER.join(shown) and all(t in offered for t in ctx.sections):
            parts = [{"system": texts.keep(system or "")}] if system_shown else []
            parts += [_section(offered[t], offered[t].render(), texts.keep) for t in ctx.sections]
            return [parts]
    out: list[list[JSON]] = []
    for index in range(count):
        content = ctx.messages[index].get("content")
        text = content if isinstance(content, str) else canonical(content).decode()
        if system_shown and index == 0:
            out.append([{"system": texts.keep(text)}])
            continue
        title = ctx.sections[index - int(system_shown)]
        section = offered.get(title)
        out.append([_section(section, text, texts.keep) if section else {"text": texts.keep(text)}])
    return out


def _section(section: Section, shown: str, keep: Callable[[str], str]) -> JSON:
    """A section part: by state version when it has one, else by its text."""
    source = section.source
    if source is not None and source.version is not None:
        return {"section": section.title, "kind": source.kind, "version": source.version}
    part: JSON = {"section": section.title, "text": keep(shown)}
    if source is not None:
        part["kind"] = source.kind
        part["items"] = [list(item) for item in source.items]
    return part


def _window(ctx: Context, start: int, keep: Callable[[str], str]) -> list[Any]:
    """The window's message ids, with the view sent for those not sent as stored."""
    changed = {*ctx.truncated_ids, *ctx.viewed_ids}
    shown = ctx.messages[start : start + len(ctx.message_ids)]
    out: list[Any] = []
    for message_id, message in zip(ctx.message_ids, shown, strict=True):
        if message_id in changed:
            out.append({"id": message_id, "shown": keep(canonical(message).decode())})
        else:
            out.append(message_id)
    return out


def recipe_refs(recipe: Mapping[str, Any]) -> tuple[set[tuple[str, int]], set[str]]:
    """The state versions ``(kind, version)`` and the text keys a recipe names."""
    versions: set[tuple[str, int]] = set()
    texts: set[str] = set()
    for key in ("policy_settings", "tools", "extra", "verbatim"):
        if isinstance(recipe.get(key), str):
            texts.add(recipe[key])
    for message in recipe.get("head") or ():
        for part in message:
            for key in ("system", "text"):
                if isinstance(part.get(key), str):
                    texts.add(part[key])
            if isinstance(part.get("version"), int):
                versions.add((str(part.get("kind")), part["version"]))
    for entry in recipe.get("window") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("shown"), str):
            texts.add(entry["shown"])
    return versions, texts


def window_ids(recipe: Mapping[str, Any]) -> list[int]:
    """The ids of the stored messages in the recipe's window, in order."""
    return [e["id"] if isinstance(e, Mapping) else int(e) for e in recipe.get("window") or ()]
