"""build_context: the prompt for the next model call, in three phases.

1. The *current turn* (the newest user message and everything after it) is
   always in. If it does not fit whole, its texts are cut to head-and-tail
   views; to make room, sections are dropped (last first), then the system
   prompt is truncated.
2. Older units fill the window while they fit the budget and the policy window.
3. The prompt is assembled: system, sections, window (oldest first), turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.context.cache_window import align_window
from engram.context.costing import Costing
from engram.context.results import (
    ORPHAN_TOOL_RESULT,
    OVER_BUDGET,
    SECTION_DROPPED,
    TURN_OVER_BUDGET,
    UNANSWERED_TOOL_CALL,
    Context,
    HistoryTotals,
    Omission,
    Provenance,
    Section,
)
from engram.context.rows import HistoryReader, Row, Stored
from engram.context.shapes import SYSTEM_JOINER
from engram.context.truncation import (
    Shown,
    fit_degraded_turn,
    min_cost,
    squeeze,
    truncate_system,
)
from engram.context.window import FIRST_CHUNK, MAX_CHUNK, Cursor, Window, current_turn, fill_window
from engram.errors import ConfigError
from engram.models import JSON
from engram.policy import Policy, get_policy
from engram.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TokenCounter

#: ``budget - reserve`` below this cannot hold a prompt at all.
MIN_BUDGET = 16


def _check_budget(budget: int, reserve: int) -> None:
    for name, value in (("budget", budget), ("reserve", reserve)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name} must be a non-negative integer, got {value!r}", field=name)
    if budget - reserve < MIN_BUDGET:
        raise ConfigError(
            f"budget - reserve is {budget - reserve} tokens ({budget} - {reserve}); "
            f"a prompt needs at least {MIN_BUDGET}",
            field="reserve" if reserve else "budget",
        )


def _first_chunk(policy: Policy, avail: int, totals: HistoryTotals | None) -> int:
    size = FIRST_CHUNK
    if totals is not None and totals.messages:
        # The session's average message size says how many rows the budget takes:
        # one read instead of a small one and a second sized from it.
        size = int(avail * totals.messages / max(totals.tokens, 1) * 1.03) + 4
        size = max(FIRST_CHUNK, min(size, MAX_CHUNK))
    if policy.max_messages is not None:
        size = min(size, policy.max_messages + 1)
    # Every message costs at least 4 tokens: never ask for more rows than could fit.
    return max(1, min(size, avail // (TOKENS_PER_MESSAGE + 1) + 1))


@dataclass(slots=True)
class _Fixed:
    """The system prompt and the sections, as they will be shown."""

    system_text: str | None
    system_cost: int
    blocks: list[tuple[Section, str]]
    block_costs: list[int]
    merge: bool = False  # shown as one system message

    @property
    def cost(self) -> int:
        return self.system_cost + sum(self.block_costs)

    def messages(self, costing: Costing) -> tuple[list[JSON], int]:
        """The leading system messages and their cost (one message when merged and cheaper)."""
        texts = ([self.system_text] if self.system_text else []) + [t for _, t in self.blocks]
        if self.merge and len(texts) > 1:
            merged = SYSTEM_JOINER.join(texts)
            cost = costing.system(merged)
            # One message saves the per-message overhead; a tokenizer could in theory
            # merge across the joins for more, so the cheaper layout is the one shown.
            if cost <= self.cost:
                return [{"role": "system", "content": merged}], cost
        return [{"role": "system", "content": text} for text in texts], self.cost


@dataclass(slots=True)
class _Report:
    """What the context says about itself: notes, omissions, degraded mode."""

    notes: list[str] = field(default_factory=list)
    omitted: list[Omission] = field(default_factory=list)
    degraded: str | None = None


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
    totals: HistoryTotals | None = None,
    merge_system: bool = False,
    provenance: Provenance | None = None,
) -> Context:
    """Build the prompt for the next model call of one session.

    Args:
        read: The session's history reader (``Store.tail`` bound to it, or a
            reader of raw rows: :mod:`engram.context.rows`).
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
        totals: The session's stored totals, carried as ``Context.history``;
            they size the first read, and with a policy's ``cache_window``
            the window's start then moves in chunks so the prompt's prefix
            stays identical between turns (:mod:`engram.context.cache_window`).
        merge_system: Show the system prompt and the sections as one system
            message (for chat templates that refuse several).
        provenance: What the prompt is built from, carried as ``Context.provenance``.

    Returns:
        The context; ``tokens <= budget - reserve`` always holds.

    Raises:
        ConfigError: budget or reserve are not usable, or ``budget - reserve``
            cannot hold even the newest user message's role and name.

    """
    pol = get_policy(policy)
    _check_budget(budget, reserve)
    costing = Costing(counter, views)
    avail = budget - reserve - REPLY_PRIMING
    report = _Report()
    fixed = _fixed_parts(costing, system, sections, merge_system)
    cursor = Cursor(read, floor_id, _first_chunk(pol, avail, totals))

    # 1. The current turn: the newest user message and every unit after it.
    user, after_user, spill = current_turn(cursor, costing)
    if spill:
        report.notes.append("no user message among the recent messages; window filled newest first")
    turn_units = ([user] if user else []) + after_user
    turn_rows = [r for u in turn_units for r in u.rows]
    turn = [_shown(costing, cursor.stored(r)) for r in turn_rows]
    if sum(s.cost for s in turn) + fixed.cost > avail:
        turn = _fit_turn(costing, turn, avail, fixed, report)

    # 2. Older units, newest first, while they fit the budget and the policy window.
    turn_cost = sum(s.cost for s in turn)
    window = Window(
        remaining=avail - fixed.cost - turn_cost,
        count=len(turn),
        tokens=turn_cost,
        exchanges=1 if user else 0,
        orphan_ids=[r[0] for u in turn_units for r in u.orphans],
        unanswered_ids=[u.unanswered for u in turn_units if u.unanswered is not None],
    )
    fill_window(cursor, costing, spill, window, pol)
    align_window(cursor, costing, window, turn_rows, pol, totals, room=avail - fixed.cost)
    _report_window(window, turn, report)

    # 3. Assemble: system, sections, window (oldest first), current turn.
    return _assemble(
        costing,
        pol,
        fixed,
        window,
        turn,
        report,
        cursor.special,
        budget=budget,
        reserve=reserve,
        history=totals,
        provenance=provenance,
    )


def _shown(costing: Costing, m: Stored) -> Shown:
    return Shown(m, costing.content(m), costing.cost(m))


def _fixed_parts(
    costing: Costing, system: str | None, sections: Sequence[Section], merge: bool
) -> _Fixed:
    """The system prompt and the non-blank sections, with their costs."""
    system_text = system or None
    blocks = [(s, s.render()) for s in sections if s.text.strip()]
    return _Fixed(
        system_text,
        costing.system(system_text) if system_text else 0,
        blocks,
        [costing.system(text) for _, text in blocks],
        merge=merge,
    )


def _fit_turn(
    costing: Costing, turn: list[Shown], avail: int, fixed: _Fixed, report: _Report
) -> list[Shown]:
    """Make the current turn fit: drop messages, sections, the system prompt, cut texts."""
    turn_min = min_cost(costing, turn)
    if turn_min > avail:
        turn, turn_min, dropped_ids = fit_degraded_turn(costing, turn, avail)
        if dropped_ids:
            report.degraded = TURN_OVER_BUDGET
            report.omitted.append(Omission(TURN_OVER_BUDGET, message_ids=dropped_ids))
            report.notes.append(
                f"the current turn cannot fit even cut down: {len(dropped_ids)} "
                "message(s) after the newest user message were left out"
            )
    fixed_cost = fixed.cost
    while fixed.blocks and fixed_cost + turn_min > avail:
        section, _ = fixed.blocks.pop()
        fixed_cost -= fixed.block_costs.pop()
        report.omitted.append(Omission(SECTION_DROPPED, detail=section.title))
        report.notes.append(f"section {section.title!r} dropped: not enough room")
    if fixed.system_text and fixed_cost + turn_min > avail:
        # Sections are all gone by now: the system prompt is the last resort.
        fixed.system_text, fixed.system_cost = truncate_system(
            costing, fixed.system_text, avail - turn_min
        )
        fixed_cost = fixed.system_cost
        report.degraded = report.degraded or "system prompt truncated"
        report.notes.append(
            "system prompt truncated: not enough room"
            if fixed.system_text
            else "system prompt dropped: not enough room"
        )
    squeeze(costing, turn, avail - fixed_cost)
    if any(s.truncated for s in turn):
        report.notes.append("the current turn is shown truncated; stored messages are whole")
    return turn


def _report_window(window: Window, turn: list[Shown], report: _Report) -> None:
    """Say where the window ended and which tool results were orphans."""
    if window.reason is not None:
        # before_id None: nothing is in the window, every candidate was left out.
        older = window.older
        oldest = older[-1][0] if older else (turn[0].message.id if turn else None)
        report.omitted.append(Omission(window.reason, before_id=oldest))
        if window.reason == OVER_BUDGET and oldest is None:
            report.notes.append("the newest message does not fit the budget")
    if window.orphan_ids:
        ids = window.orphan_ids
        report.omitted.append(Omission(ORPHAN_TOOL_RESULT, message_ids=tuple(sorted(ids))))
        report.notes.append(f"{len(ids)} tool result(s) without their tool call left out")
    if window.unanswered_ids:
        ids = window.unanswered_ids
        report.omitted.append(Omission(UNANSWERED_TOOL_CALL, message_ids=tuple(sorted(ids))))
        report.notes.append(
            f"{len(ids)} assistant message(s) shown without the tool calls no result answers"
        )


def _assemble(
    costing: Costing,
    pol: Policy,
    fixed: _Fixed,
    window: Window,
    turn: list[Shown],
    report: _Report,
    special: Mapping[int, Stored],
    *,
    budget: int,
    reserve: int,
    history: HistoryTotals | None,
    provenance: Provenance | None,
) -> Context:
    """Lay out the prompt: system, sections, window (oldest first), current turn."""
    messages, fixed_cost = fixed.messages(costing)
    older = window.older
    older.reverse()
    message_ids = [r[0] for r in older]
    truncated_ids: list[int] = []
    viewed_ids: list[int] = []
    views = costing.views
    if views:
        for row in older:
            m = special.get(row[0])
            out = m.to_openai() if m is not None else {"role": row[1], "content": row[2]}
            if row[0] in views:
                out["content"] = views[row[0]]
                viewed_ids.append(row[0])
            messages.append(out)
    elif not special:
        # Plain rows only (the common case): this runs once per message.
        messages += [{"role": r[1], "content": r[2]} for r in older]
    else:
        messages += [_openai(r, special.get(r[0])) for r in older]
    has_tools = window.has_tools
    turn_start = len(messages)
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
    return Context(
        messages=messages,
        tokens=REPLY_PRIMING + fixed_cost + window.tokens,
        budget=budget,
        reserve=reserve,
        message_ids=message_ids,
        omitted=report.omitted,
        truncated_ids=truncated_ids,
        counter=costing.counter.name,
        exact=bool(costing.counter.exact) and not has_tools,
        policy=pol.name,
        notes=report.notes,
        sections=[section.title for section, _ in fixed.blocks],
        section_tokens=list(fixed.block_costs),
        system_tokens=fixed.system_cost if fixed.system_text else 0,
        history=history,
        viewed_ids=viewed_ids,
        degraded=report.degraded,
        turn_start=turn_start if turn else None,
        provenance=provenance,
    )


def _openai(row: Row, m: Stored | None) -> JSON:
    """The prompt form of a window row (whole when special)."""
    if m is not None and (m.name or m.tool_calls or m.tool_call_id or m.parts):
        return m.to_openai()
    return {"role": row[1], "content": row[2]}
