"""Citations of important-data items: made, read from a model, merged, shown.

Important data is a structure of lists and objects (:mod:`.important`); its
citations live beside it, never inside its values (items are de-duplicated and
compared by their text, which a marker would change). The citation document
is ``{field: {item key: [[low, high], ...]}}`` with the keys of
:func:`engram.compaction.important.cite_key`.

A model is asked to end each string item with its marker (``"Pro is $14 per
month [#12]"``); :func:`split_markers` takes the markers out of its answer.
:func:`decorate` puts them back, for the prompt only.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from engram.compaction.citations import (
    Cites,
    check_ranges,
    from_ids,
    has_marker,
    marker,
    parse_cited,
    read_cites,
    to_json,
    union,
)
from engram.compaction.important import DICT_KEYS, LIST_KEYS, Sources, cite_key
from engram.models import JSON

#: Ranges of one item's citation the prompt shows (the rest stay stored: ``[#4, #9, …]``).
PROMPT_RANGES = 2
#: Fields whose citations the prompt leaves out: a name is mentioned all along, and its
#: mentions cost more prompt than they tell (they stay stored, and the dashboard shows them).
UNCITED_IN_PROMPT = frozenset({"entities"})

#: Told to a model with the extraction prompt, when the transcript shows ids.
DATA_CITE_INSTRUCTIONS = (
    "Each message of the conversation starts with its id in brackets, such as [#12]. End "
    "every string value you write with the ids of the messages it comes from, in the same "
    'brackets: "Pro costs $14 per month [#12]", or [#12-#30] for a stretch.'
)


def from_sources(sources: Sources, ids: Sequence[int | None]) -> JSON:
    """The citation document of items found in messages ``ids`` (by index; None: no id)."""
    order = [i for i in ids if i is not None]
    out: JSON = {}
    for name, items in sources.items():
        for key, indexes in items.items():
            cited = [ids[i] for i in indexes if 0 <= i < len(ids) and ids[i] is not None]
            cites = from_ids([i for i in cited if i is not None], order)
            if cites:
                out.setdefault(name, {})[key] = to_json(cites)
    return out


def split_markers(data: Mapping[str, Any]) -> tuple[JSON, JSON]:
    """A model's important data without its markers, and the citations they gave.

    String items of list fields are cited one by one; an entry of an object
    field by its key (a list of strings inside it element by element).
    """
    clean: JSON = {}
    cites: JSON = {}
    for name, value in data.items():
        if name in LIST_KEYS and isinstance(value, list):
            items = []
            for item in value:
                text, found = _strip(item)
                items.append(text)
                _add(cites, name, cite_key(text), found)
            clean[name] = items
        elif name in DICT_KEYS and isinstance(value, Mapping):
            entries: JSON = {}
            for key, entry in value.items():
                if isinstance(entry, list):
                    kept = []
                    for element in entry:
                        text, found = _strip(element)
                        kept.append(text)
                        _add(cites, name, cite_key(text, within=str(key)), found)
                    entries[str(key)] = kept
                else:
                    entries[str(key)], found = _strip_deep(entry)
                    _add(cites, name, str(key), found)
            clean[name] = entries
        else:
            clean[name], _ = _strip_deep(value)
    return clean, cites


def _strip(value: Any) -> tuple[Any, Cites]:
    if not isinstance(value, str) or not has_marker(value):
        return value, ()
    paragraphs = parse_cited(value)
    if not paragraphs:
        return value, ()
    text = " ".join(p for p, _ in paragraphs)
    return text, union(*(c for _, c in paragraphs))


def _strip_deep(value: Any) -> tuple[Any, Cites]:
    if isinstance(value, str):
        return _strip(value)
    if isinstance(value, Mapping):
        found: list[Cites] = []
        out: JSON = {}
        for key, item in value.items():
            out[key], cites = _strip_deep(item)
            found.append(cites)
        return out, union(*found)
    if isinstance(value, list):
        pairs = [_strip_deep(item) for item in value]
        return [p for p, _ in pairs], union(*(c for _, c in pairs))
    return value, ()


def _add(cites: JSON, name: str, key: str, found: Cites) -> None:
    if found:
        items = cites.setdefault(name, {})
        items[key] = to_json(union(read_cites(items.get(key)) or (), found))


def check(cites: Mapping[str, Any], allowed: Collection[int], earlier: Cites) -> tuple[JSON, int]:
    """Keep the ranges a fold may cite (see :func:`~.citations.check_ranges`); count the rest."""
    out: JSON = {}
    dropped = 0
    for name, items in cites.items():
        for key, stored in (items or {}).items():
            kept, lost = check_ranges(read_cites(stored) or (), allowed, earlier)
            dropped += lost
            if kept:
                out.setdefault(name, {})[key] = to_json(kept)
    return out, dropped


def merge(old: Mapping[str, Any], new: Mapping[str, Any], data: Mapping[str, Any]) -> JSON:
    """Old and new citations together, kept only for the items ``data`` still holds."""
    present = item_keys(data)
    out: JSON = {}
    for source in (old, new):
        for name, items in source.items():
            if not isinstance(items, Mapping):
                continue
            for key, stored in items.items():
                if key not in present.get(name, ()):
                    continue
                known = read_cites(out.get(name, {}).get(key)) or ()
                merged = union(known, read_cites(stored) or ())
                if merged:
                    out.setdefault(name, {})[key] = to_json(merged)
    return out


def item_keys(data: Mapping[str, Any]) -> dict[str, set[str]]:
    """The citation keys of every item ``data`` holds, by field."""
    out: dict[str, set[str]] = {}
    for name in LIST_KEYS:
        out[name] = {cite_key(item) for item in data.get(name) or []}
    for name in DICT_KEYS:
        keys: set[str] = set()
        for key, value in (data.get(name) or {}).items():
            keys.add(str(key))
            if isinstance(value, list):
                keys |= {cite_key(element, within=str(key)) for element in value}
        out[name] = keys
    return out


def cites_of(data: Mapping[str, Any], cites: Mapping[str, Any]) -> Iterable[tuple[str, str, Cites]]:
    """Every item of ``data`` with its citation: ``(field, shown item, cites)``, in order."""
    for name in LIST_KEYS:
        stored = cites.get(name) or {}
        for item in data.get(name) or []:
            yield name, _shown(item), read_cites(stored.get(cite_key(item))) or ()
    for name in DICT_KEYS:
        stored = cites.get(name) or {}
        for key, value in (data.get(name) or {}).items():
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                for element in value:
                    cited = read_cites(stored.get(cite_key(element, within=str(key)))) or ()
                    yield name, f"{key}: {element}", cited
            else:
                yield name, f"{key}: {_shown(value)}", read_cites(stored.get(str(key))) or ()


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def every_cite(cites: Mapping[str, Any]) -> Cites:
    """All the ranges the important data cites, as one citation."""
    found: list[Cites] = []
    for items in cites.values():
        if isinstance(items, Mapping):
            found.extend(read_cites(v) or () for v in items.values())
    return union(*found)


def decorate(data: Mapping[str, Any], cites: Mapping[str, Any]) -> JSON:
    """A copy of ``data`` whose cited values end with their markers (for the prompt).

    At most :data:`PROMPT_RANGES` ranges per item; :data:`UNCITED_IN_PROMPT` fields none.
    """
    out: JSON = copy.deepcopy(dict(data))
    for name in LIST_KEYS:
        if name in UNCITED_IN_PROMPT:
            continue
        stored = cites.get(name) or {}
        out[name] = [_marked(item, stored.get(cite_key(item))) for item in out.get(name) or []]
    for name in DICT_KEYS:
        stored = cites.get(name) or {}
        entries = out.get(name) or {}
        for key, value in list(entries.items()):
            if isinstance(value, list):
                entries[key] = [
                    _marked(v, stored.get(cite_key(v, within=str(key))))
                    if isinstance(v, str)
                    else v
                    for v in value
                ]
            elif not isinstance(value, Mapping | list):
                entries[key] = _marked(value, stored.get(str(key)))
    return out


def _marked(value: Any, stored: Any) -> Any:
    cites = read_cites(stored) or ()
    if not cites or isinstance(value, Mapping | list):
        return value
    return f"{value} {marker(cites, limit=PROMPT_RANGES)}"
