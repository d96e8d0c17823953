"""What changed between two recorded turns of a session.

Messages that entered and left the window (by id), each section whose source
changed and why (a compaction folded more messages, a deleted message made
the summary stale, the agent state or tool cache was updated, a memory was
written, edited or deleted), whether the system prompt, tools or policy
changed, and where the two prompts stop sharing a byte prefix: exactly, on
their canonical bytes, when both rebuild; else at message granularity from
the recorded sizes. A turn against itself differs in nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engram.compaction.state import STALE_KEY, STATE_KIND
from engram.models import JSON
from engram.provenance.digest import canonical, first_difference
from engram.provenance.recipe import window_ids
from engram.provenance.replay import Replay
from engram.store.base import PromptArchive


@dataclass(frozen=True, slots=True)
class PromptDiff:
    """Turn ``b`` against turn ``a``."""

    a: int
    b: int
    entered: list[int] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    sections: list[JSON] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    shared_messages: int = 0
    shared_bytes: int = 0
    bytes_a: int = 0
    bytes_b: int = 0
    exact: bool = True

    @property
    def identical(self) -> bool:
        """The two prompts are the same bytes and were built the same way."""
        return (
            not (self.entered or self.left or self.sections or self.changed)
            and self.shared_bytes == self.bytes_a == self.bytes_b
        )

    def to_dict(self) -> JSON:
        """Plain JSON-ready data."""
        return {
            "a": self.a,
            "b": self.b,
            "identical": self.identical,
            "entered": list(self.entered),
            "left": list(self.left),
            "sections": list(self.sections),
            "changed": list(self.changed),
            "shared_prefix": {
                "messages": self.shared_messages,
                "bytes": self.shared_bytes,
                "exact": self.exact,
            },
            "bytes": [self.bytes_a, self.bytes_b],
        }


_SETTINGS = ("policy", "policy_settings", "budget", "reserve", "counter", "model", "tools")


def diff(archive: PromptArchive, scope: str, session: str, a: Replay, b: Replay) -> PromptDiff:
    """Turn ``b`` against turn ``a`` (both replayed: a replay missing parts still diffs)."""
    ra, rb = a.recipe, b.recipe
    ids_a, ids_b = window_ids(ra), window_ids(rb)
    entered = [i for i in ids_b if i not in set(ids_a)]
    left = [i for i in ids_a if i not in set(ids_b)]
    changed = [key for key in _SETTINGS if ra.get(key) != rb.get(key)]
    if _system(ra) != _system(rb):
        changed.append("system prompt")
    sections = _sections(archive, scope, session, ra, rb)
    keys_a, keys_b = ra.get("keys") or [], rb.get("keys") or []
    shared = 0
    while shared < min(len(keys_a), len(keys_b)) and keys_a[shared] == keys_b[shared]:
        shared += 1
    bytes_a, bytes_b = _size(ra), _size(rb)
    if a.messages is not None and b.messages is not None:
        raw_a, raw_b = canonical(a.messages), canonical(b.messages)
        prefix, exact = first_difference(raw_a, raw_b), True
    else:
        prefix = 1 + sum((ra.get("sizes") or [])[:shared]) + max(0, shared - 1)
        prefix, exact = (bytes_a if keys_a == keys_b else prefix), False
    return PromptDiff(
        a.turn, b.turn, entered, left, sections, changed, shared, prefix, bytes_a, bytes_b, exact
    )


def _size(recipe: Mapping[str, Any]) -> int:
    sizes: list[int] = recipe.get("sizes") or []
    return 2 + sum(sizes) + max(0, len(sizes) - 1)  # "[" + items joined by "," + "]"


def _system(recipe: Mapping[str, Any]) -> list[str]:
    return [p["system"] for m in recipe.get("head") or () for p in m if "system" in p]


def _parts(recipe: Mapping[str, Any]) -> dict[str, JSON]:
    return {p["section"]: p for m in recipe.get("head") or () for p in m if "section" in p}


def _sections(archive: PromptArchive, scope: str, session: str, ra: JSON, rb: JSON) -> list[JSON]:
    before, after = _parts(ra), _parts(rb)
    out: list[JSON] = []
    for title in [*before, *(t for t in after if t not in before)]:
        pa, pb = before.get(title), after.get(title)
        if pa == pb:
            continue
        change: JSON = {"title": title, "kind": (pb or pa or {}).get("kind")}
        if (pa is None or pb is None) and change["kind"] == "memories":
            change["why"] = _memories((pa or {}).get("items") or [], (pb or {}).get("items") or [])
        elif pa is None or pb is None:
            change["why"] = _presence(title, pa is None, rb)
        elif "version" in pa and "version" in pb:
            change["from_version"], change["to_version"] = pa["version"], pb["version"]
            change["why"] = _versions(
                archive, scope, session, pb["kind"], pa["version"], pb["version"]
            )
        elif "items" in pa or "items" in pb:
            change["why"] = _memories(pa.get("items") or [], pb.get("items") or [])
        else:
            change["why"] = "its text changed"
        out.append(change)
    return out


def _presence(title: str, added: bool, later: Mapping[str, Any]) -> str:
    if added:
        return "section added: its state now has something to show"
    dropped = any(
        o.get("reason") == "section dropped" and o.get("detail") == title
        for o in later.get("omitted") or ()
    )
    return "section dropped: not enough room" if dropped else "section gone: its state is empty"


def _versions(
    archive: PromptArchive, scope: str, session: str, kind: str, old: int, new: int
) -> str:
    if kind != STATE_KIND:
        what = "agent state" if kind == "agent_state" else kind.replace("_", " ")
        return f"the {what} was updated (version {old} -> {new})"
    a = archive.load_state_version(scope, session, kind, old)
    b = archive.load_state_version(scope, session, kind, new)
    if b is not None and isinstance(b.data.get(STALE_KEY), str):
        return f"a deleted or edited message made the summary stale (version {new})"
    if a is None or b is None:
        return f"compaction (version {old} -> {new}; the details were pruned)"
    wa, wb = a.data.get("watermark", 0), b.data.get("watermark", 0)
    if wb != wa:
        return (
            f"a compaction folded messages up to id {wb} into summary version "
            f"{b.data.get('summary_version')} (version {old} -> {new})"
        )
    return f"the compaction state was rewritten (version {old} -> {new})"


def _memories(before: list[Any], after: list[Any]) -> str:
    was = {int(i): str(at) for i, at in before}
    now = {int(i): str(at) for i, at in after}
    said = [f"memory {i} written" for i in sorted(now.keys() - was.keys())]
    said += [f"memory {i} deleted" for i in sorted(was.keys() - now.keys())]
    said += [f"memory {i} edited" for i in sorted(now.keys() & was.keys()) if now[i] != was[i]]
    return "; ".join(said) or "the memories were shown differently"
