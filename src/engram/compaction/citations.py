"""Citations: the ids of the messages a summary paragraph or an important-data item came from.

A citation is a tuple of id ranges, ``((112, 140), (150, 150))``, shown as
``[#112-#140, #150]``. A range names the messages of the session whose ids lie
between its ends (ids are unique across a store and grow in conversation order,
so other sessions' ids inside a range are simply not this session's messages).

Summarizers speak *cited text*: paragraphs separated by blank lines, each
ending with its marker. The offline summarizer writes it, a model is asked
to (:data:`CITE_INSTRUCTIONS`), and :func:`parse_cited` reads it back into
paragraphs and their ranges. :func:`check_ranges` keeps only ranges whose ends
are messages the fold may cite; the rest are dropped and counted.

Pure code, deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

#: One range of message ids, both ends included.
Range = tuple[int, int]
#: A citation: sorted, non-overlapping ranges.
Cites = tuple[Range, ...]

#: Positions (in the fold's order) two cited messages may be apart and still
#: share a range: a user's statements around the assistant's reply make one range.
MERGE_GAP = 2

#: Told to a model beside a transcript whose lines start with their ids.
CITE_INSTRUCTIONS = (
    "Each message above starts with its id in brackets, such as [#12]. End every paragraph "
    "you write with the ids of the messages it comes from, in the same brackets: [#12], "
    "[#12-#30] for a stretch, [#12-#30, #41] for several. Keep the ids the previous summary "
    "gives for what you keep from it. Cite only ids you were shown."
)

_ONE = r"#\s*(\d{1,19})(?:\s*[-–]\s*#?\s*(\d{1,19}))?"
_MARKER = re.compile(rf"\[\s*{_ONE}(?:\s*[,;]\s*{_ONE})*\s*\]")
_ONE_RE = re.compile(_ONE)
_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")
# What follows a marker that ends a sentence: its stop (then a space or the end), or the end.
_CLOSING = re.compile(r"[.!?…]+(?=\s|$)|[ \t]*$")
_ENDS_SENTENCE = re.compile(r"[.!?…][\"”')]?\s*$")
_SPACE_BEFORE_STOP = re.compile(r"[ \t]+([.!?…,;:])")


def normalize(ranges: Iterable[Sequence[int]]) -> Cites:
    """Ranges sorted, with overlapping and touching ones merged (``a <= b`` in each)."""
    pairs = sorted((int(r[0]), int(r[1])) for r in ranges if int(r[0]) <= int(r[1]))
    out: list[Range] = []
    for low, high in pairs:
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return tuple(out)


def from_ids(ids: Iterable[int], order: Sequence[int] | None = None) -> Cites:
    """The ranges of cited ``ids``; with ``order`` (the fold's ids), neighbours share a range.

    Two cited messages at most :data:`MERGE_GAP` positions apart in ``order`` are
    one range. Ids not in ``order`` stand alone.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return ()
    if not order:
        return normalize((i, i) for i in wanted)
    position = {mid: index for index, mid in enumerate(order)}
    out: list[Range] = []
    last: int | None = None
    for mid in wanted:
        here = position.get(mid)
        if out and last is not None and here is not None and here - last <= MERGE_GAP:
            out[-1] = (out[-1][0], mid)
        else:
            out.append((mid, mid))
        last = here
    return normalize(out)


def union(*cites: Iterable[Sequence[int]]) -> Cites:
    """All of the given ranges as one citation."""
    return normalize(r for one in cites for r in one)


def marker(cites: Cites, *, limit: int | None = None) -> str:
    """``[#112-#140, #150]`` (empty text for no citation).

    With ``limit``, only the first ``limit`` ranges are written, then ``…``.
    """
    if not cites:
        return ""
    shown = cites if limit is None else cites[:limit]
    parts = [f"#{low}" if low == high else f"#{low}-#{high}" for low, high in shown]
    if len(shown) < len(cites):
        parts.append("…")
    return "[" + ", ".join(parts) + "]"


def ids_text(cites: Cites) -> str:
    """The marker's inside, ``#112-#140, #150``, as the ``expand`` tool takes it."""
    return marker(cites)[1:-1]


def covers(cites: Iterable[Sequence[int]], message_id: int) -> bool:
    """Whether a range of ``cites`` holds ``message_id``."""
    return any(int(r[0]) <= message_id <= int(r[1]) for r in cites)


def parse_ranges(text: str) -> Cites:
    """The ranges written in ``text``: ``#12``, ``#12-#30``, ``[#12-#30, #41]``, or bare numbers.

    A reversed range (``#30-#12``) is read in order. Returns () when none is written.
    """
    found: list[Range] = []
    for match in _ONE_RE.finditer(text):
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        found.append((min(low, high), max(low, high)))
    if not found:
        for number in re.findall(r"\d{1,19}", text):
            found.append((int(number), int(number)))
    return normalize(found)


def _marker_ranges(match: re.Match[str]) -> list[Range]:
    return list(parse_ranges(match.group(0)))


def has_marker(text: str) -> bool:
    """Whether ``text`` holds a citation marker."""
    return _MARKER.search(text) is not None


def parse_cited(text: str) -> list[tuple[str, Cites]]:
    """Read cited text back into paragraphs and their citations.

    Blank lines separate paragraphs; inside one, a marker that closes a sentence
    (only punctuation and a space follow it) ends a paragraph too, so a model
    that cites each sentence gives one paragraph per sentence. A marker inside
    a sentence cites the paragraph it is in. Markers are taken out of the text;
    a paragraph of nothing but a marker gives its ranges to the one before.
    """
    out: list[tuple[str, Cites]] = []
    for block in _BLANK_LINE.split(text.strip()):
        pending: list[Range] = []
        start = 0
        pieces: list[str] = []
        for match in _MARKER.finditer(block):
            pieces.append(block[start : match.start()])
            pending.extend(_marker_ranges(match))
            start = match.end()
            closing = _CLOSING.match(block, start)
            if closing is not None or _ENDS_SENTENCE.search(pieces[-1]):
                if closing is not None:
                    pieces.append(closing.group(0))
                    start = closing.end()
                _close(out, "".join(pieces), pending)
                pieces, pending = [], []
        pieces.append(block[start:])
        _close(out, "".join(pieces), pending)
    return out


def _close(out: list[tuple[str, Cites]], text: str, ranges: list[Range]) -> None:
    cleaned = _SPACE_BEFORE_STOP.sub(r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()
    if cleaned.strip(".!?…,;: \n\t"):
        out.append((cleaned, normalize(ranges)))
    elif ranges and out:
        previous, cites = out[-1]
        out[-1] = (previous, union(cites, ranges))


def cited_text(paragraphs: Sequence[tuple[str, Cites]]) -> str:
    """Paragraphs as cited text (blank lines between, each ending with its marker)."""
    return "\n\n".join(f"{text} {marker(cites)}" if cites else text for text, cites in paragraphs)


def check_ranges(cites: Cites, allowed: Collection[int], earlier: Cites = ()) -> tuple[Cites, int]:
    """Keep the ranges whose both ends may be cited; return them and how many were dropped.

    An end may be cited when it is one of ``allowed`` (the fold's message ids)
    or lies inside ``earlier`` (what the previous summary already cited).
    """
    kept: list[Range] = []
    dropped = 0
    for low, high in cites:
        if _citable(low, allowed, earlier) and _citable(high, allowed, earlier):
            kept.append((low, high))
        else:
            dropped += 1
    return normalize(kept), dropped


def _citable(message_id: int, allowed: Collection[int], earlier: Cites) -> bool:
    return message_id in allowed or covers(earlier, message_id)


def read_cites(value: Any) -> Cites | None:
    """A stored citation (``[[112, 140], [150, 150]]``), or None when it is not one."""
    if not isinstance(value, list | tuple):
        return None
    out: list[Range] = []
    for item in value:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in item)
            or item[0] > item[1]
        ):
            return None
        out.append((int(item[0]), int(item[1])))
    return normalize(out)


def to_json(cites: Cites) -> list[list[int]]:
    """A citation as stored: ``[[low, high], ...]``."""
    return [[low, high] for low, high in cites]
