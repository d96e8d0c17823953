"""The prompts of a session: build the next one, record it, replay and diff recorded ones.

A mixin of :class:`engram.session.Session` (one job: prompts). Every prompt
built for a real turn (``context(compact=True)``) is recorded in the prompt
log with its recipe (:mod:`engram.provenance`); :meth:`SessionPrompts.prompt`
rebuilds a recorded turn byte for byte from the store, :meth:`prompts` lists
them with their cacheable share and the provider's cached tokens, and
:meth:`prompt_diff` says what changed between two of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engram.context import Context
from engram.errors import InvalidQuery, TurnNotFound
from engram.policy import DEFAULT_BUDGET, Policy, get_policy
from engram.prompt import PromptRequest, build_prompt, stored_totals
from engram.prompt_log import PromptLog
from engram.provenance.recipe import VIA_LIBRARY, PendingTurn
from engram.provenance.writer import PromptTicket
from engram.runtime import Runtime
from engram.store.base import MAX_PAGE, PromptArchive, archives_prompts

if TYPE_CHECKING:  # replaying, listing and diffing are loaded when first used
    from engram.provenance.diff import PromptDiff
    from engram.provenance.replay import Replay
    from engram.provenance.turns import TurnSummary


class SessionPrompts:
    """Building, recording, replaying and diffing the prompts of one session."""

    runtime: Runtime
    scope: str
    id: str
    _ticket: PromptTicket | None = None

    @property
    def policy(self) -> Policy:
        """The session's policy (the session defines it)."""
        raise NotImplementedError

    def context(
        self,
        budget: int | None = None,
        *,
        reserve: int | None = None,
        system: str | None = None,
        model: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
        compact: bool = True,
        merge_system: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        extra: Sequence[Mapping[str, Any]] = (),
        via: str = VIA_LIBRARY,
        record: bool = True,
    ) -> Context:
        """The prompt for the next turn: fits ``budget - reserve`` tokens, exactly counted.

        Order: system, long-term memories, important data, summary, then the
        recent messages after the compaction watermark. When the policy's
        compaction is due it runs first (``sync_compaction``, within the
        configured deadline) or in the background, and
        ``Context.pending_compaction`` says so; a compaction whose model failed
        is reported in ``Context.degraded``. ``compact=False`` never writes:
        it shows the prompt the stored state gives now (a note says when a
        compaction is due). A prompt built with ``compact=True`` (a real turn)
        is recorded in the session's prompt log (:meth:`prompt_log`) with its
        recipe, so it can be replayed byte for byte (:meth:`prompt`): pass the
        ``tools`` offered with it, any ``extra`` messages sent after
        ``ctx.messages`` (tool rounds not stored), and, once the model has
        answered, its usage to :meth:`answered`. ``via`` labels the
        interface that sent it. With ``record=False`` nothing is recorded yet:
        call :meth:`record_prompt` once what goes with it is known.
        ``merge_system`` shows the system prompt and
        the sections as one system message. For Anthropic, use
        ``ctx.to_anthropic()``; the policy's ``cache_window`` keeps the prefix
        identical between turns so providers' prompt caches can reuse it.
        """
        active = get_policy(policy) if policy is not None else self.policy
        request = PromptRequest(
            budget=budget if budget is not None else (active.default_budget or DEFAULT_BUDGET),
            reserve=reserve if reserve is not None else active.default_reserve,
            system=system,
            model=model,
            compact=compact,
            merge_system=merge_system,
        )
        # One read of the stored totals serves the prompt (Context.history), the
        # cache-aware window and the prompt log.
        totals = stored_totals(self.runtime.store, self.scope, self.id)
        ctx = build_prompt(self.runtime, self.scope, self.id, active, request, totals=totals)
        self.runtime.remember_visible(self.scope, self.id, ctx.message_ids)
        if compact and record:
            self.record_prompt(ctx, tools=tools, extra=extra, via=via)
        return ctx

    def record_prompt(
        self,
        ctx: Context,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        extra: Sequence[Mapping[str, Any]] = (),
        via: str = VIA_LIBRARY,
    ) -> None:
        """Record a prompt built with ``context(record=False)`` as a turn (see :meth:`context`).

        ``tools`` are the tool schemas sent with it, ``extra`` the messages sent
        after ``ctx.messages``. A session never written records nothing.
        """
        if ctx.history is None:
            return
        recipe = PendingTurn(
            ctx,
            sent=[*ctx.messages, *map(dict, extra)] if extra else None,
            tools=[dict(t) for t in tools] if tools else None,
            via=via,
        )
        self._ticket = self.runtime.prompts.record(
            self.scope,
            self.id,
            sent_tokens=ctx.tokens,
            budget=ctx.budget,
            history=(ctx.history.messages, ctx.history.tokens),
            recipe=recipe,
        )

    def answered(self, usage: Mapping[str, Any] | None) -> None:
        """Record the provider's usage of the answer to the newest prompt this handle recorded.

        ``usage`` is the answer's ``usage`` as the provider sent it (OpenAI
        ``prompt_tokens_details.cached_tokens``, Anthropic
        ``cache_read_input_tokens``): the turn list then shows the tokens the
        provider's prompt cache served. Nothing happens before a recorded turn.
        """
        if self._ticket is not None:
            self._ticket.answered(usage)

    def prompt_log(self) -> PromptLog:
        """Tokens sent per recorded turn against the full history's size, and the totals."""
        return self.runtime.prompts.load(self.scope, self.id)

    # -- recorded turns ---------------------------------------------------------------

    def prompts(
        self, *, after: int = 0, limit: int = 100, newest: bool = False
    ) -> list[TurnSummary]:
        """Recorded turns, oldest first, a page at a time (the newest ``limit`` with ``newest``).

        Each has its number (from 1), time, tokens, the share of its prompt
        repeating the previous turn's start (``cacheable``) and the tokens the
        provider reported serving from its cache (``cached_tokens``).
        """
        from engram.provenance.turns import list_turns

        after = _number("after", after, low=0)
        limit = _number("limit", limit, low=1)
        archive = self._archive()
        self.runtime.prompts.flush(self.scope, self.id)
        return list_turns(
            archive, self.scope, self.id, after=after, limit=min(limit, MAX_PAGE), newest=newest
        )

    def prompt(self, turn: int) -> Replay:
        """Recorded turn ``turn`` rebuilt exactly as sent, checked against its SHA-256.

        ``Replay.messages`` is None (and ``missing`` says why) when a part it
        needs was pruned or deleted; ``verified`` is False when the rebuilt
        bytes do not match what was sent.

        Raises:
            TurnNotFound: no such turn is recorded (or its recipe was pruned).
            InvalidQuery: ``turn`` is not a positive integer.

        """
        from engram.provenance.replay import replay

        return replay(self.runtime.store, self._archive(), self.scope, self.id, self._record(turn))

    def prompt_diff(self, a: int, b: int) -> PromptDiff:
        """What changed from recorded turn ``a`` to turn ``b`` (see :mod:`engram.provenance.diff`).

        Raises:
            TurnNotFound: either turn is not recorded.
            InvalidQuery: a turn is not a positive integer.

        """
        from engram.provenance.diff import diff

        first, second = self.prompt(a), self.prompt(b)
        return diff(self._archive(), self.scope, self.id, first, second)

    def _archive(self) -> PromptArchive:
        store: object = self.runtime.store
        if not archives_prompts(store):
            raise TurnNotFound(f"the store {self.runtime.store.url} keeps no prompt recipes")
        return store

    def _record(self, turn: int) -> Any:
        number = _number("turn", turn, low=1)
        archive = self._archive()
        self.runtime.prompts.flush(self.scope, self.id)
        found = archive.list_prompts(self.scope, self.id, after=number - 1, limit=1)
        if not found or found[0].turn != number:
            raise TurnNotFound(
                f"no recorded turn {number} in session {self.id!r} "
                "(its recipe may have been pruned)"
            )
        return found[0]


def _number(name: str, value: object, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidQuery(f"{name} must be an integer >= {low}, got {value!r}")
    return value
