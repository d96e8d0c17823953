"""The context builder: decides exactly what the model sees.

Input: a :data:`HistoryReader` over one session's stored messages, a token
budget, an optional system prompt and fixed sections (long-term memories,
important data, the conversation summary...). Output: a :class:`Context`, an
OpenAI-format message list that always fits, plus a report of what was left
out and why. Pure code: the only I/O is through the reader callback.

The prompt is ``system``, then each section as a headed system message in the
given order, then the recent window. The window is chosen newest first:

1. The *current turn* (the newest user message and everything after it) is
   always in. If it does not fit whole, its texts are cut to head-and-tail
   views with a marker; stored messages are never changed. To make room,
   sections are dropped (last first), then the system prompt is truncated.
2. Older *units* are added while they fit the budget and the policy window
   (messages, tokens, exchanges). A unit is one message, or an assistant
   message with ``tool_calls`` together with the tool results answering it,
   so a tool call and its results are never split. The window is a
   contiguous suffix: the first unit that does not fit ends it.
3. Tool messages whose assistant call is not in the window are dropped and
   reported: OpenAI rejects orphan tool results.

Counting: stored messages carry their exact size in the storage encoding
(``o200k_base``). For that encoding the stored counts are used as they are
(the hot path encodes nothing); for :class:`~engram.tokens.ApproximateCounter`
they are converted part by part; other counters (``cl100k_base``, custom)
recount, with a bounded cache. ``Context.tokens`` always equals
``tokens.count_messages(counter, ctx.messages)``.

The same inputs give the same messages, byte for byte (invariant 8): nothing
in the prompt depends on time, randomness or dict iteration order.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from engram.errors import ConfigError, StoreError
from engram.models import JSON, Message
from engram.policy import Policy, get_policy
from engram.tokens import (
    REPLY_PRIMING,
    STORAGE_ENCODING,
    TOKENS_PER_MESSAGE,
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    count_message,
    storage_counter,
)

#: ``budget - reserve`` below this cannot hold a prompt at all.
MIN_BUDGET = 16
#: Rows asked of the reader first (about a 3K-token window of ordinary messages);
#: later reads are sized from the average message seen so far, or double.
#: Small on purpose: a row read and not used costs about as much as a sixth of a
#: read call, so reading a few rows too few is cheaper than many too many.
FIRST_CHUNK = 16
MAX_CHUNK = 512
MIN_CHUNK = 2
#: Messages scanned back looking for the newest user message before giving up.
MAX_TURN_SCAN = 2000
#: Content tokens each message of the current turn keeps before sections are dropped.
MIN_VIEW_TOKENS = 32
#: Entries of the recount cache (per message) and of the text-count cache (system, sections).
RECOUNT_CACHE_SIZE = 4096
TEXT_CACHE_SIZE = 256

_UNLIMITED = 1 << 62  # a policy limit that is not set

#: Reads one session: the newest ``limit`` messages with ``id < before_id``
#: (all when None), oldest first. ``Store.tail`` bound to a session is one.
HistoryReader = Callable[[int, "int | None"], list[Message]]

# Omission reasons.
OLDER_THAN_WINDOW = "older than window"
OVER_BUDGET = "over budget"
ORPHAN_TOOL_RESULT = "orphan tool result"
SECTION_DROPPED = "section dropped"
TURN_OVER_BUDGET = "turn over budget"


@dataclass(frozen=True, slots=True)
class Section:
    """A fixed block shown as a system message after the system prompt.

    Rendered as the title in brackets, a newline, then the text; blank text is skipped.
    """

    title: str
    text: str

    def render(self) -> str:
        """Return the content of the system message that carries this section."""
        return f"[{self.title}]\n{self.text}"


@dataclass(frozen=True, slots=True)
class Omission:
    """Something left out of the prompt, and why.

    Attributes:
        reason: One of "older than window", "over budget", "orphan tool result",
            "section dropped", "turn over budget".
        message_ids: Stored messages left out, when they are known one by one.
        before_id: For window ends: every candidate message with a smaller id
            (and above the floor) was left out; their number is not counted.
        detail: Human-readable detail (e.g. the section title).

    """

    reason: str
    message_ids: tuple[int, ...] = ()
    before_id: int | None = None
    detail: str = ""

    def to_dict(self) -> JSON:
        """Plain JSON-ready data."""
        out = asdict(self)
        out["message_ids"] = list(self.message_ids)
        return out


@dataclass(frozen=True, slots=True)
class Context:
    """A prompt that fits, and the account of how it was built.

    Attributes:
        messages: OpenAI chat-completions messages, ready to send.
        tokens: Exact size of ``messages`` with ``counter``, reply priming included.
        budget: The budget asked for.
        reserve: Tokens kept free for the answer; ``tokens <= budget - reserve``.
        message_ids: Ids of the stored messages in the prompt, in order.
        omitted: What was left out, and why.
        truncated_ids: Stored messages shown as truncated views.
        counter: Name of the token counter.
        exact: True when ``tokens`` is exact for the target model (no
            approximate counter, no tool calls, whose counts are estimates).
        policy: Name of the policy used.
        notes: Human-readable remarks: degraded modes, pending compaction...
        sections: Titles of the sections in the prompt, in order.
        viewed_ids: Stored messages shown through a caller-given view.
        pending_compaction: Compaction is due but has not run yet.
        degraded: Why the prompt is not the normal one, or None.

    """

    messages: list[JSON]
    tokens: int
    budget: int
    reserve: int
    message_ids: list[int]
    omitted: list[Omission]
    truncated_ids: list[int]
    counter: str
    exact: bool
    policy: str
    notes: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    viewed_ids: list[int] = field(default_factory=list)
    pending_compaction: bool = False
    degraded: str | None = None

    def to_dict(self) -> JSON:
        """Everything as plain JSON-ready data."""
        return {
            "messages": self.messages,
            "tokens": self.tokens,
            "budget": self.budget,
            "reserve": self.reserve,
            "message_ids": list(self.message_ids),
            "omitted": [o.to_dict() for o in self.omitted],
            "truncated_ids": list(self.truncated_ids),
            "counter": self.counter,
            "exact": self.exact,
            "policy": self.policy,
            "notes": list(self.notes),
            "sections": list(self.sections),
            "viewed_ids": list(self.viewed_ids),
            "pending_compaction": self.pending_compaction,
            "degraded": self.degraded,
        }


# --------------------------------------------------------------------------- counting


class _LRU:
    """A small thread-safe LRU map (the builder may run in server worker threads)."""

    def __init__(self, size: int):
        self._size = size
        self._data: OrderedDict[Any, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> int | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Any, value: int) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            if len(self._data) > self._size:
                self._data.popitem(last=False)


_RECOUNTS = _LRU(RECOUNT_CACHE_SIZE)
_TEXT_COUNTS = _LRU(TEXT_CACHE_SIZE)


def _counter_key(counter: TokenCounter) -> tuple[Any, ...]:
    # Counters are identified by type, name and margin: two counters with the
    # same key must count alike (documented for custom counters).
    kind = type(counter)
    return (kind.__module__, kind.__qualname__, counter.name, getattr(counter, "margin", None))


_STORED, _SCALED, _RECOUNT = "stored", "scaled", "recount"


class _Costing:
    """Per-message costs in the target counter's units, as cheaply as possible."""

    def __init__(self, counter: TokenCounter | None, views: Mapping[int, str] | None):
        if counter is None:
            counter = storage_counter()
        self.counter = counter
        self.key = _counter_key(counter)
        self.views = views or {}
        if isinstance(counter, TiktokenCounter) and counter.name == STORAGE_ENCODING:
            self.mode = _STORED
        elif isinstance(counter, ApproximateCounter) and counter.base.name == STORAGE_ENCODING:
            self.mode = _SCALED
            self._base = counter.base
            self._scale = counter.scale
        else:
            self.mode = _RECOUNT
        self._role_cache: dict[str, int] = {}
        #: Stored counts are the answer as they are (no views, storage encoding).
        self.plain = self.mode == _STORED and not self.views

    def content(self, m: Message) -> str:
        """Return the text shown for ``m``: a caller view, or the stored content."""
        if self.views:
            view = self.views.get(m.id)
            if view is not None:
                return view
        return m.content

    def cost(self, m: Message) -> int:
        """Exact size of ``m`` (as shown) with this counter, overhead included."""
        if self.views and m.id in self.views:
            return self._recount(m, self.views[m.id])
        if self.mode == _STORED:
            return m.tokens
        if self.mode == _SCALED and not (m.name or m.tool_calls or m.tool_call_id):
            # stored = 3 + base(role) + base(content); count_message with the
            # approximate counter scales each part separately, so do the same.
            role = self._base_role(m.role)
            content = m.tokens - TOKENS_PER_MESSAGE - role
            if content >= 0:
                return TOKENS_PER_MESSAGE + self._scale(role) + self._scale(content)
        return self._recount(m, m.content)

    def _base_role(self, role: str) -> int:
        value = self._role_cache.get(role)
        if value is None:
            value = self._role_cache[role] = self._base.count_text(role)
        return value

    def _recount(self, m: Message, content: str) -> int:
        key = (self.key, m.id, m.tokens, hash(content))
        value = _RECOUNTS.get(key)
        if value is None:
            value = self.message(m, content)
            _RECOUNTS.put(key, value)
        return value

    def message(self, m: Message, content: str) -> int:
        """Size of ``m`` shown with ``content`` (uncached)."""
        return count_message(
            self.counter,
            m.role,
            content,
            name=m.name,
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
        )

    def fixed(self, m: Message) -> int:
        """Size of ``m`` with empty content: what no truncation can remove."""
        return self.message(m, "")

    def system(self, text: str) -> int:
        """Size of a system message, cached by text (system prompts repeat every turn)."""
        key = (self.key, text)
        value = _TEXT_COUNTS.get(key)
        if value is None:
            value = count_message(self.counter, "system", text)
            _TEXT_COUNTS.put(key, value)
        return value

    def text(self, text: str) -> int:
        """Tokens of bare text."""
        return self.counter.count_text(text)


# --------------------------------------------------------------------------- reading


class _Cursor:
    """Walks a session newest first, reading in chunks.

    Chunks double (from ``first``) unless ``estimate`` says how many more rows
    the window can still take, so reads follow the window, not the history.
    """

    __slots__ = ("_before", "_done", "_floor", "_read", "_size", "buf", "estimate", "rows_read")

    def __init__(self, read: HistoryReader, floor_id: int | None, first: int):
        self._read = read
        self._floor = floor_id
        self._before: int | None = None
        self.buf: list[Message] = []
        self._done = False
        self._size = max(1, first)
        self.rows_read = 0
        self.estimate: Callable[[], int | None] | None = None

    def next(self) -> Message | None:
        if not self.buf:
            if self._done:
                return None
            self._fill()
            if not self.buf:
                return None
        return self.buf.pop()

    def _fill(self) -> None:
        size = self._size
        if self.estimate is not None and (wanted := self.estimate()) is not None:
            size = max(MIN_CHUNK, min(wanted, MAX_CHUNK))
        rows = self._read(size, self._before)
        self.rows_read += len(rows)
        if len(rows) < size:
            self._done = True
        if rows:
            if self._before is not None and rows[-1].id >= self._before:
                # A reader that ignores before_id would make this loop forever.
                raise StoreError(
                    f"history reader returned id {rows[-1].id}, not older than {self._before}"
                )
            self._before = rows[0].id
            if self._floor is not None and rows[0].id <= self._floor:
                rows = [m for m in rows if m.id > self._floor]
                self._done = True
        self.buf = rows
        self._size = min(size * 2, MAX_CHUNK)


class _Unit:
    """One atomic piece of the window: a message, or a tool call with its results."""

    __slots__ = ("cost", "is_user", "messages", "orphans")

    def __init__(self, messages: list[Message], orphans: list[Message], cost: int, is_user: bool):
        self.messages = messages  # oldest first
        self.orphans = orphans  # tool results just after it with no parent, oldest first
        self.cost = cost
        self.is_user = is_user


_NO_ORPHANS: list[Message] = []  # shared and never mutated: the common case allocates nothing


def _next_unit(cursor: _Cursor, costing: _Costing) -> _Unit | None:
    """Read the next older unit; None at the start of the candidate history."""
    buf = cursor.buf
    if buf and buf[-1].role != "tool":
        # Hot path: a plain message straight from the buffer.
        top = buf.pop()
        cost = top.tokens if costing.plain else costing.cost(top)
        return _Unit([top], _NO_ORPHANS, cost, top.role == "user")
    pending: list[Message] = []  # tool messages, newest first
    while True:
        m = cursor.next()
        if m is None:
            if pending:  # their call is before the floor or missing: orphans
                return _Unit([], pending[::-1], 0, False)
            return None
        if m.role == "tool":
            pending.append(m)
            continue
        if not pending:
            return _Unit([m], _NO_ORPHANS, costing.cost(m), m.role == "user")
        members = [m]
        orphans: list[Message] = []
        if m.role == "assistant" and m.tool_calls:
            ids = {call.get("id") for call in m.tool_calls if isinstance(call, Mapping)}
            for tool in reversed(pending):
                if tool.tool_call_id is not None and tool.tool_call_id in ids:
                    members.append(tool)
                else:
                    orphans.append(tool)
        else:
            orphans = pending[::-1]
        return _Unit(members, orphans, sum(costing.cost(x) for x in members), m.role == "user")


# --------------------------------------------------------------------------- truncation


def _view(text: str, keep: int, marker: str) -> str:
    head, tail = (keep + 1) // 2, keep // 2
    return text[:head] + "\n" + marker + "\n" + (text[len(text) - tail :] if tail else "")


def _truncate(
    costing: _Costing, text: str, allowance: int, total: int, marker: Callable[[int], str]
) -> str:
    """Return the longest head-and-tail view of ``text`` whose count fits ``allowance``.

    ``marker(shown)`` says what was cut; if even the marker does not fit, a
    shorter one is used, and as a last resort the empty string.
    """
    markers = (marker, lambda shown: "[... truncated by Engram ...]", lambda shown: "[...]")
    for make in markers:
        if costing.text(make(total)) > allowance:
            continue
        # Exponential then binary search on characters kept: each probe counts
        # only the view (bounded by the allowance), never the whole text.
        n = len(text)

        def fits(keep: int, make: Callable[[int], str] = make) -> bool:
            return costing.text(_view(text, keep, make(total))) <= allowance

        lo, probe = 0, 8
        while probe < n and fits(probe):
            lo, probe = probe, probe * 2
        hi = min(probe, n - 1)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        keep = lo
        for _ in range(64):  # the real "shown" number can differ from the placeholder
            head, tail = (keep + 1) // 2, keep // 2
            shown = costing.text(text[:head]) + (costing.text(text[n - tail :]) if tail else 0)
            view = _view(text, keep, make(shown)) if keep else make(shown)
            if costing.text(view) <= allowance:
                return view
            if keep == 0:
                break
            keep = max(0, keep - max(1, keep // 16))
    return ""


def _message_marker(m: Message, total: int) -> Callable[[int], str]:
    def marker(shown: int) -> str:
        return (
            f"[... truncated by Engram: {shown} of {total} tokens shown; "
            f"full message id={m.id} is stored ...]"
        )

    return marker


def _system_marker(total: int) -> Callable[[int], str]:
    def marker(shown: int) -> str:
        return f"[... system prompt truncated by Engram: {shown} of {total} tokens shown ...]"

    return marker


@dataclass(slots=True)
class _Shown:
    """A stored message as it will be shown."""

    message: Message
    content: str
    cost: int
    truncated: bool = False


def _squeeze(costing: _Costing, shown: list[_Shown], allowance: int) -> None:
    """Cut the texts of ``shown`` (in place) so their total fits ``allowance``.

    Water-filling: every message keeps up to the same number of content
    tokens, the largest that fits; smaller messages stay whole. The caller
    guarantees that the fixed parts (messages with empty content) fit.
    """
    if sum(s.cost for s in shown) <= allowance:
        return
    fixed = [costing.fixed(s.message) for s in shown]
    content = [max(0, s.cost - f) for s, f in zip(shown, fixed, strict=True)]
    base = sum(fixed)
    lo, hi = 0, max(content, default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if base + sum(min(c, mid) for c in content) <= allowance:
            lo = mid
        else:
            hi = mid - 1
    cap = lo
    originals = [(s.content, s.cost) for s in shown]
    for _ in range(32):
        for s, (text, cost), c in zip(shown, originals, content, strict=True):
            if c <= cap:
                s.content, s.cost, s.truncated = text, cost, False
                continue
            view = _truncate(costing, text, cap, c, _message_marker(s.message, c))
            s.content, s.cost, s.truncated = view, costing.message(s.message, view), True
        if sum(s.cost for s in shown) <= allowance or cap == 0:
            return
        cap = max(0, cap * 7 // 8 - 1)  # custom counters need not be additive


def _min_cost(costing: _Costing, shown: list[_Shown]) -> int:
    """Return what ``shown`` costs with every text cut to at most MIN_VIEW_TOKENS."""
    total = 0
    for s in shown:
        fixed = costing.fixed(s.message)
        total += fixed + min(max(0, s.cost - fixed), MIN_VIEW_TOKENS)
    return total


# --------------------------------------------------------------------------- builder


def _check_budget(budget: int, reserve: int) -> None:
    for name, value in (("budget", budget), ("reserve", reserve)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    if budget - reserve < MIN_BUDGET:
        raise ConfigError(
            f"budget - reserve is {budget - reserve} tokens ({budget} - {reserve}); "
            f"a prompt needs at least {MIN_BUDGET}"
        )


def _first_chunk(policy: Policy, avail: int) -> int:
    size = FIRST_CHUNK
    if policy.max_messages is not None:
        size = min(size, policy.max_messages + 1)
    # Every message costs at least 4 tokens: never ask for more rows than could fit.
    return max(1, min(size, avail // (TOKENS_PER_MESSAGE + 1) + 1))


def build_context(
    read: HistoryReader,
    *,
    budget: int,
    reserve: int = 0,
    system: str | None = None,
    counter: TokenCounter | None = None,
    policy: Policy | str | Mapping[str, Any] | None = None,
    sections: Sequence[Section] = (),
    floor_id: int | None = None,
    views: Mapping[int, str] | None = None,
) -> Context:
    """Build the prompt for the next model call of one session.

    Args:
        read: The session's history reader (``Store.tail`` bound to it).
        budget: Most tokens the prompt may take, reserve included.
        reserve: Tokens kept free for the answer: ``ctx.tokens <= budget - reserve``.
        system: The system prompt, first in the prompt (truncated only as a last resort).
        counter: The target model's counter; None means exact ``o200k_base``.
        policy: A :class:`Policy`, preset name or policy dict; None is ``default``.
        sections: Fixed blocks shown after the system prompt, in order;
            dropped last first when the current turn needs the room.
        floor_id: Messages with ``id <= floor_id`` are not candidates (they
            are folded into a summary).
        views: Text to show instead of the stored content, by message id
            (e.g. short views of long answers made by compaction).

    Returns:
        The context; ``tokens <= budget - reserve`` always holds.

    Raises:
        ConfigError: budget or reserve are not usable, or ``budget - reserve``
            cannot hold even the newest user message's role and name.

    """
    pol = get_policy(policy)
    _check_budget(budget, reserve)
    costing = _Costing(counter, views)
    avail = budget - reserve - REPLY_PRIMING
    notes: list[str] = []
    omitted: list[Omission] = []
    degraded: str | None = None

    system_text = system or None
    system_cost = costing.system(system_text) if system_text else 0
    blocks = [(s, s.render()) for s in sections if s.text.strip()]
    block_costs = [costing.system(text) for _, text in blocks]

    cursor = _Cursor(read, floor_id, _first_chunk(pol, avail))

    # 1. The current turn: the newest user message and every unit after it.
    after_user: list[_Unit] = []  # newest first
    user: _Unit | None = None
    scanned = 0
    while (unit := _next_unit(cursor, costing)) is not None:
        if unit.is_user:
            user = unit
            break
        after_user.append(unit)
        scanned += len(unit.messages) + len(unit.orphans)
        if scanned > MAX_TURN_SCAN:
            break
    spill: list[_Unit] = []
    if user is None:
        # No user message within reach: everything scanned is ordinary history.
        spill, after_user = after_user, []
        if spill:
            notes.append("no user message among the recent messages; window filled newest first")

    turn_units = ([user] if user else []) + after_user[::-1]
    turn = [_Shown(m, costing.content(m), costing.cost(m)) for u in turn_units for m in u.messages]
    turn_cost = sum(s.cost for s in turn)
    fixed_cost = system_cost + sum(block_costs)

    if turn_cost + fixed_cost > avail:
        turn_min = _min_cost(costing, turn)
        if turn_min > avail:
            turn, turn_min, dropped_ids = _fit_degraded_turn(costing, turn, avail)
            if dropped_ids:
                degraded = TURN_OVER_BUDGET
                omitted.append(Omission(TURN_OVER_BUDGET, message_ids=dropped_ids))
                notes.append(
                    f"the current turn cannot fit even cut down: {len(dropped_ids)} "
                    "message(s) after the newest user message were left out"
                )
        while blocks and fixed_cost + turn_min > avail:
            section, _ = blocks.pop()
            fixed_cost -= block_costs.pop()
            omitted.append(Omission(SECTION_DROPPED, detail=section.title))
            notes.append(f"section {section.title!r} dropped: not enough room")
        if system_text and fixed_cost + turn_min > avail:
            # Sections are all gone by now: the system prompt is the last resort.
            system_text, system_cost = _truncate_system(costing, system_text, avail - turn_min)
            fixed_cost = system_cost
            degraded = degraded or "system prompt truncated"
            notes.append(
                "system prompt truncated: not enough room"
                if system_text
                else "system prompt dropped: not enough room"
            )
        _squeeze(costing, turn, avail - fixed_cost)
        turn_cost = sum(s.cost for s in turn)
        if any(s.truncated for s in turn):
            notes.append("the current turn is shown truncated; stored messages are whole")

    # 2. Older units, newest first, while they fit the budget and the policy window.
    # This loop runs once per message of the window: plain messages take a fast
    # path with no calls; tool groups and views go through _next_unit.
    remaining = avail - fixed_cost - turn_cost
    count = len(turn)
    window_tokens = turn_cost
    exchanges = 1 if user else 0
    max_messages = pol.max_messages or _UNLIMITED
    max_tokens = pol.max_window_tokens or _UNLIMITED
    max_exchanges = pol.max_exchanges or _UNLIMITED
    older: list[Message] = []  # newest first
    has_tools = False
    orphan_ids: list[int] = [m.id for u in turn_units for m in u.orphans]
    spill.reverse()  # pop() now gives the newest first
    plain = costing.plain

    def estimate() -> int | None:
        # Rows the window may still take, from the average size seen so far, plus a
        # few: one more small read when it falls short costs less than reading a
        # wide margin of rows that are then thrown away.
        if not count:
            return None
        room = min(remaining, max_tokens - window_tokens)
        rows = int(room * count / max(window_tokens, 1) * 1.03) + 4
        return min(rows, max_messages - count + 1)

    cursor.estimate = estimate
    reason = None
    while True:
        buf = cursor.buf
        if plain and not spill and buf:
            # Plain messages straight from the buffer, newest first, with no calls;
            # the taken ones are cut off the buffer once, at the end of the run.
            end = len(buf)
            i = end
            while i:
                m = buf[i - 1]
                if m.role == "tool":
                    break
                cost = m.tokens
                if (
                    count >= max_messages
                    or window_tokens + cost > max_tokens
                    or exchanges >= max_exchanges
                ):
                    reason = OLDER_THAN_WINDOW
                    break
                if cost > remaining:
                    reason = OVER_BUDGET
                    break
                i -= 1
                older.append(m)
                remaining -= cost
                window_tokens += cost
                count += 1
                if m.role == "user":
                    exchanges += 1
                elif m.tool_calls:
                    has_tools = True
            if i != end:
                del buf[i:]
            if reason is not None:
                break
            # Here the buffer is used up or starts with a tool group: _next_unit.
        unit = spill.pop() if spill else _next_unit(cursor, costing)
        if unit is None:
            break
        members, cost = unit.messages, unit.cost
        if not members:  # orphans at the very start of the candidates
            orphan_ids.extend(m.id for m in unit.orphans)
            continue
        if (
            count + len(members) > max_messages
            or window_tokens + cost > max_tokens
            or exchanges >= max_exchanges
        ):
            reason = OLDER_THAN_WINDOW
            break
        if cost > remaining:
            reason = OVER_BUDGET
            break
        older.extend(reversed(members))
        if unit.orphans:
            orphan_ids.extend(m.id for m in unit.orphans)
        remaining -= cost
        window_tokens += cost
        count += len(members)
        if unit.is_user:
            exchanges += 1
        has_tools = has_tools or any(m.tool_calls or m.tool_call_id for m in members)
    if reason is not None:
        # before_id None: nothing is in the window, every candidate was left out.
        oldest = older[-1].id if older else (turn[0].message.id if turn else None)
        omitted.append(Omission(reason, before_id=oldest))
        if reason == OVER_BUDGET and oldest is None:
            notes.append("the newest message does not fit the budget")
    if orphan_ids:
        omitted.append(Omission(ORPHAN_TOOL_RESULT, message_ids=tuple(sorted(orphan_ids))))
        notes.append(f"{len(orphan_ids)} tool result(s) without their tool call left out")

    # 3. Assemble: system, sections, window (oldest first), current turn.
    messages: list[JSON] = []
    if system_text:
        messages.append({"role": "system", "content": system_text})
    for _, text in blocks:
        messages.append({"role": "system", "content": text})
    older.reverse()
    message_ids = [m.id for m in older]
    truncated_ids: list[int] = []
    viewed_ids: list[int] = []
    views = costing.views
    if views:
        for m in older:
            out = m.to_openai()
            if m.id in views:
                out["content"] = views[m.id]
                viewed_ids.append(m.id)
            messages.append(out)
    else:
        # Message.to_openai inlined for plain messages: this runs once per message.
        messages += [
            m.to_openai()
            if m.name or m.tool_calls or m.tool_call_id
            else {"role": m.role, "content": m.content}
            for m in older
        ]
    for shown in turn:
        m = shown.message
        out = m.to_openai()
        if shown.content is not m.content:
            out["content"] = shown.content
        messages.append(out)
        message_ids.append(m.id)
        if shown.truncated:
            truncated_ids.append(m.id)
        elif views and m.id in views:
            viewed_ids.append(m.id)
        if m.tool_calls or m.tool_call_id:
            has_tools = True
    tokens = REPLY_PRIMING + fixed_cost + window_tokens
    return Context(
        messages=messages,
        tokens=tokens,
        budget=budget,
        reserve=reserve,
        message_ids=message_ids,
        omitted=omitted,
        truncated_ids=truncated_ids,
        counter=costing.counter.name,
        exact=bool(costing.counter.exact) and not has_tools,
        policy=pol.name,
        notes=notes,
        sections=[section.title for section, _ in blocks],
        viewed_ids=viewed_ids,
        degraded=degraded,
    )


def _fit_degraded_turn(
    costing: _Costing, turn: list[_Shown], avail: int
) -> tuple[list[_Shown], int, tuple[int, ...]]:
    """Keep the user message and the newest messages whose cut-down size fits.

    Only used when the whole current turn cannot fit even cut down; the
    messages between the user message and the kept ones are left out.
    """
    user, rest = turn[0], turn[1:]
    need = _min_cost(costing, [user])
    if costing.fixed(user.message) > avail:
        raise ConfigError(
            f"budget - reserve ({avail + REPLY_PRIMING} tokens) cannot hold even the role "
            f"and name of the newest user message (id={user.message.id})"
        )
    need = min(need, avail)
    # Walk back by whole tool groups: a tool result is kept only with its call.
    kept: list[_Shown] = []
    group: list[_Shown] = []
    for s in reversed(rest):
        group.insert(0, s)
        if s.message.role == "tool":
            continue
        cost = _min_cost(costing, group)
        if need + cost > avail:
            break
        need += cost
        kept[:0] = group
        group = []
    dropped = tuple(s.message.id for s in rest[: len(rest) - len(kept)])
    return [user, *kept], need, dropped


def _truncate_system(costing: _Costing, text: str, allowance: int) -> tuple[str | None, int]:
    """Cut the system prompt to fit ``allowance`` tokens as a message (None: nothing fits)."""
    fixed = costing.system("")
    if allowance - fixed <= 0:
        return None, 0
    total = costing.text(text)
    view = _truncate(costing, text, allowance - fixed, total, _system_marker(total))
    if not view:
        return None, 0
    return view, count_message(costing.counter, "system", view)


__all__ = [
    "FIRST_CHUNK",
    "MAX_CHUNK",
    "MIN_BUDGET",
    "Context",
    "HistoryReader",
    "Omission",
    "Section",
    "build_context",
]
