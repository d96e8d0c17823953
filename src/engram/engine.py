"""The ``Engram`` facade: the composition root, and the operations on a whole store or scope.

``engram.open(url)`` builds one :class:`Engram`: it opens the store, reads the
settings (:mod:`engram.config`), and wires a :class:`~engram.runtime.Runtime`
(store, token counter, model, background scheduler). Sessions are handles on
that runtime (:class:`~engram.session.Session`). The facade holds no
conversation data, so many ``Engram`` objects (threads, processes, servers)
can share one database.

Every interface (CLI, tools, the server) reaches the store only through this
facade and its sessions.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from engram import app_documents, forgetting, searching, telemetry
from engram import scopes as scope_ops
from engram.activity import Activity, scope_activity, session_activity
from engram.apikeys import ApiKeys
from engram.compaction.metrics import CompactionMetrics
from engram.config import Config
from engram.errors import (
    ConfigError,
    ImportFormatError,
    InvalidMessage,
    InvalidQuery,
    SessionNotFound,
    StoreError,
)
from engram.flags import FlagMetrics
from engram.intake.checks import MAX_CONTENT_BYTES, optional_timestamp, roles_filter, text_field
from engram.intake.validation import check_id
from engram.llm.client import LLMClient
from engram.memories import Memories, MemoryBudget, MemoryMetrics
from engram.models import JSON, ROLES, Message, NewMessage, SearchHit, SessionInfo
from engram.policy import CURRENT, Policy, get_policy
from engram.receipts import Receipt
from engram.runtime import MemoriesProvider, Runtime
from engram.scopes import ScopeSummary
from engram.search.when import moment
from engram.session import Session
from engram.store import MAX_PAGE, Store, open_store
from engram.store.api_keys import has_api_keys

if TYPE_CHECKING:
    from engram.background.queue import QueueScheduler
    from engram.provenance.whatif import WhatIf
    from engram.transfer.documents import PreparedDocument

__all__ = [
    "FROM_ENV",
    "Engram",
    "MemoriesProvider",
    "Session",
    "open",
]

logger = logging.getLogger("engram")

#: ``llm=FROM_ENV``: configure the model from ``ENGRAM_LLM_*`` (none set: no model).
FROM_ENV: Final = "from env"


class Engram:
    """Conversation memory over one store. Thread-safe; cheap to create."""

    def __init__(
        self,
        store: Store,
        *,
        tz: str | None = None,
        llm: LLMClient | str | None = FROM_ENV,
        memories_text: MemoriesProvider | None = None,
        memory_cap: int | None = None,
        memory_budget: MemoryBudget | None = None,
        run_jobs: bool | None = None,
        config: Config | None = None,
    ) -> None:
        """Wrap ``store``.

        Args:
            store: Where everything lives.
            tz: Time zone date phrases are read in (default ``ENGRAM_TZ``, else UTC).
            llm: The model that writes summaries: an :class:`LLMClient`, None
                for no model (offline summaries), or :data:`FROM_ENV` (the
                default) to read ``ENGRAM_LLM_BASE_URL`` / ``_API_KEY`` /
                ``_MODEL``. A client built from the environment is closed by
                :meth:`close`; a client passed in belongs to the caller.
            memories_text: Gives a scope's long-term memories as prompt text;
                shown after the system prompt. Default: the scope's stored
                memories.
            memory_cap: Long-term memories kept per scope (default 10).
            memory_budget: Energy budget for memory work (default: unlimited).
            run_jobs: On a store with a shared job queue (PostgreSQL), run its
                jobs in a worker thread of this object (started now). False:
                only enqueue, and leave the jobs to other processes (web servers
                with dedicated workers). Other stores run background work in
                process and ignore it.
            config: Settings; the arguments above win over it. Default:
                :meth:`Config.from_env`.

        """
        settings = (config or Config.from_env()).replace(
            **{
                name: value
                for name, value in (("tz", tz), ("memory_cap", memory_cap), ("run_jobs", run_jobs))
                if value is not None
            }
        )
        self.store = store
        self._owns_llm = False
        if isinstance(llm, str):
            if llm != FROM_ENV:
                raise ConfigError(f"llm must be an LLMClient, None or {FROM_ENV!r}, got {llm!r}")
            model = LLMClient.from_env()
            self._owns_llm = model is not None
        elif llm is None or isinstance(llm, LLMClient):
            model = llm
        else:
            raise ConfigError(f"llm must be an LLMClient or None, got {type(llm).__name__}")
        self._closed = False
        # Last: the scheduler starts threads, and nothing after it may fail.
        self.runtime = Runtime.create(
            store, settings, llm=model, memory_budget=memory_budget, memories_text=memories_text
        )

    # -- what the runtime holds -----------------------------------------------------

    @property
    def config(self) -> Config:
        """The settings this object runs with."""
        return self.runtime.config

    @property
    def tz(self) -> Any:
        """The time zone date phrases are read in."""
        return self.runtime.tz

    @property
    def llm(self) -> LLMClient | None:
        """The model that writes summaries and memories, or None."""
        return self.runtime.llm

    @property
    def memory_cap(self) -> int:
        """Long-term memories kept per scope."""
        return self.runtime.config.memory_cap

    @property
    def memory_budget(self) -> MemoryBudget:
        """The energy budget of memory work."""
        return self.runtime.memory_budget

    @property
    def memory_metrics(self) -> MemoryMetrics:
        """Counters of memory work."""
        return self.runtime.memory_metrics

    @property
    def flag_metrics(self) -> FlagMetrics:
        """Counts of recalled text that reads like instructions to a model (``/metrics``)."""
        return self.runtime.flag_metrics

    @property
    def compaction_metrics(self) -> CompactionMetrics:
        """Counts and seconds of the compactions this ``Engram`` ran, by outcome."""
        return self.runtime.compaction_metrics

    @property
    def jobs(self) -> QueueScheduler | None:
        """The shared job queue scheduler (PostgreSQL), else None."""
        from engram.background.queue import QueueScheduler

        scheduler = self.runtime.scheduler
        return scheduler if isinstance(scheduler, QueueScheduler) else None

    # -- sessions and messages ----------------------------------------------------

    def session(
        self,
        session_id: str,
        scope: str = "default",
        *,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> Session:
        """A handle on one conversation. The session is created on first write.

        A ``policy`` (preset name, :class:`Policy` or dict) is stored with the
        session so background work and later handles use it too.
        """
        check_id("scope", scope)
        check_id("session", session_id)
        resolved = get_policy(policy) if policy is not None else None
        if resolved is not None:
            self.store.ensure_session(scope, session_id, policy=resolved.to_dict())
        return Session(self.runtime, scope, session_id, resolved)

    def message(self, message_id: int, scope: str = "default") -> Message:
        """One stored message by id, only if it belongs to ``scope``."""
        return self.runtime.message(scope, message_id)

    def count(self, message: NewMessage) -> int:
        """Exact size of a message in the storage encoding, chat overhead included."""
        return self.runtime.count(message)

    # -- scopes ---------------------------------------------------------------------

    def scopes(self) -> list[str]:
        """Every scope with a session or a memory."""
        return self.store.list_scopes()

    def sessions(
        self, scope: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        if scope is not None:
            check_id("scope", scope)
        return self.store.list_sessions(scope, limit=limit, offset=offset)

    def session_info(self, session_id: str, scope: str = "default") -> SessionInfo | None:
        """The stored session with its totals, or None when it has no messages yet."""
        check_id("scope", scope)
        check_id("session", session_id)
        return self.store.get_session(scope, session_id)

    def require_session(self, session_id: str, scope: str = "default") -> Session:
        """A handle on a session that exists.

        Raises:
            SessionNotFound: no such session in this scope.

        """
        if self.session_info(session_id, scope) is None:
            raise SessionNotFound(f"no session {session_id!r} in scope {scope!r}")
        return self.session(session_id, scope)

    def what_if(
        self,
        session_id: str,
        scope: str = "default",
        *,
        policy: Policy | str | Mapping[str, Any] = CURRENT,
        budget: int | None = None,
        reserve: int | None = None,
        model: str | None = None,
        system: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> WhatIf:
        """Play a session's stored history again under ``policy``, writing nothing.

        ``policy`` is a preset name, a :class:`Policy` or dict, or ``"current"``
        (the session's own). ``budget``, ``model`` and ``system`` default to the
        newest recorded turn's, else the policy's default budget,
        ``gpt-4o-mini`` and none. See :mod:`engram.provenance.whatif` for what is
        measured; ``progress(done, total)`` is called after each turn.

        Raises:
            SessionNotFound: no such session in this scope.
            ConfigError: an unknown policy or a budget that cannot hold a prompt.

        """
        from engram.provenance.whatif import history, recorded_budget, recorded_settings, what_if

        handle = self.require_session(session_id, scope)
        active = handle.policy if policy == CURRENT else get_policy(policy)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise ConfigError(f"budget must be an integer, got {budget!r}")
        recorded_model, recorded_system = recorded_settings(self.store, scope, session_id)
        if budget is None:
            budget = recorded_budget(self.store, scope, session_id)
        return what_if(
            history(self.store, scope, session_id),
            active,
            budget=budget,
            reserve=reserve,
            model=model or recorded_model,
            system=system if system is not None else recorded_system,
            config=self.config,
            progress=progress,
        )

    def search(
        self,
        query: str,
        scope: str = "default",
        *,
        limit: int = 10,
        roles: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        mode: str = "auto",
        partner: bool = False,
        as_of: datetime | None = None,
    ) -> list[SearchHit]:
        """Ranked search over every session of a scope (``start <= created_at < end``).

        ``mode`` is ``"auto"``, ``"keyword"`` (BM25), ``"semantic"`` or ``"hybrid"``; ``partner``
        returns each hit's exchange partner; date phrases in ``query`` are read
        against ``as_of`` (default now). See :meth:`Session.search`.
        """
        check_id("scope", scope)
        query = text_field("query", query, max_bytes=MAX_CONTENT_BYTES, error=InvalidQuery)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidQuery(f"limit must be a positive integer, got {limit!r}")
        request = searching.Request(
            scope=scope,
            session=None,
            text=query,
            now=moment(as_of),
            tz=self.runtime.tz,
            roles=roles_filter(roles, ROLES),
            start=optional_timestamp("start", start),
            end=optional_timestamp("end", end),
            limit=min(limit, MAX_PAGE),
        )
        hits = searching.run(self.runtime, request, mode)
        return searching.add_partners(self.store, hits, query) if partner else hits

    def export_session(self, session_id: str, scope: str = "default") -> JSON:
        """One session as an Engram session document (messages, states), for ``import``."""
        from engram.transfer import (
            documents as transfer,  # session documents: only export and import need them
        )

        self.require_session(session_id, scope)
        return transfer.export_session(self.store, scope, session_id)

    def import_documents(
        self, documents: Sequence[Mapping[str, Any]], *, scope: str | None = None
    ) -> list[PreparedDocument]:
        """Write Engram session documents, all or none; each is checked before the first write.

        Like a JSONL import, importing a document again adds nothing: the
        messages its session already holds are skipped (``skipped`` of each
        returned document), and only new ones are appended after the
        session's own; the policy and states of a session that exists stay
        as they are. ``scope`` overrides the documents' own scopes.

        Raises:
            ImportFormatError: a document is malformed (named by its position).
            InvalidMessage: a message in it would be refused.
            StoreError: the store failed; none of the documents was kept.

        """
        from engram.store.grouping import all_or_nothing
        from engram.transfer import documents as transfer

        prepared = []
        for index, document in enumerate(documents):
            try:
                prepared.append(transfer.prepare_document(document, scope=scope))
            except (ImportFormatError, InvalidMessage) as exc:
                raise ImportFormatError(f"document #{index}: {exc}") from None
        held: dict[tuple[str, str], Counter[str]] = {}
        fresh = [transfer.unseen(self.store, item, held) for item in prepared]
        with all_or_nothing(self.store) as group:  # a failure midway leaves no session written
            for item in fresh:
                group.touch(item.info.scope, item.info.id)
                transfer.write_document(self.store, item, allow_existing=True)
        return fresh

    def scope_summaries(self, only: Sequence[str] | None = None) -> list[ScopeSummary]:
        """Every scope (or those of ``only`` that exist) with its totals, sorted by name."""
        names = self.store.list_scopes()
        if only is not None:
            wanted = set(only)
            names = [name for name in names if name in wanted]
        return [scope_ops.summarize(self.store, name) for name in names]

    def scope_summary(self, scope: str) -> ScopeSummary:
        """One scope with its totals (zeros for a scope with nothing stored)."""
        check_id("scope", scope)
        return scope_ops.summarize(self.store, scope)

    def session_page(
        self,
        scope: str,
        *,
        limit: int = 50,
        offset: int = 0,
        order: scope_ops.SessionOrder = "recent",
    ) -> tuple[list[SessionInfo], int]:
        """A page of a scope's sessions (by last activity) and the scope's session count."""
        check_id("scope", scope)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_PAGE:
            raise InvalidQuery(f"limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidQuery(f"offset must be a non-negative integer, got {offset!r}")
        return scope_ops.session_page(self.store, scope, limit=limit, offset=offset, order=order)

    def purge_scope(self, scope: str) -> JSON:
        """Like :meth:`delete_scope`; how many ``sessions``, ``messages``, ``memories`` went."""
        return dict(self.delete_scope(scope).counts)

    def delete_scope(self, scope: str) -> Receipt:
        """Delete every session and memory of a scope (admin); the receipt (``counts`` as above).

        The audit trail stays, without the memories' text; :meth:`forget_scope` deletes it too.
        """
        check_id("scope", scope)
        return forgetting.purge_scope(self.runtime, scope)

    def usage_totals(self, only: Sequence[str] | None = None) -> JSON:
        """Model calls Engram made, with tokens and cost, summed over scopes (or ``only``)."""
        return scope_ops.usage(self.store, list(only) if only is not None else self.scopes())

    def job_counts(self) -> dict[str, int] | None:
        """Jobs of the shared queue by status (PostgreSQL), or None without one."""
        jobs = self.jobs
        return jobs.queue.counts() if jobs is not None else None

    def api_keys(self) -> ApiKeys:
        """The server's API keys, kept in this store.

        Raises:
            ConfigError: the backend cannot keep API keys.

        """
        if not has_api_keys(self.store):
            raise ConfigError(f"the store {self.url} cannot keep API keys")
        return ApiKeys(self.store)

    def app_document(self, scope: str, session: str, name: str) -> JSON:
        """A framework's own JSON document kept with a session ({} before the first save).

        See :mod:`engram.app_documents` (adapters keep framework state there).
        """
        check_id("scope", scope)
        check_id("session", session)
        return app_documents.load(self.store, scope, session, name)[0]

    def update_app_document(
        self, scope: str, session: str, name: str, change: Callable[[JSON], JSON | None]
    ) -> JSON:
        """Change that document by compare-and-set (``change`` is pure: it may run again).

        Creates the session, empty, when it does not exist yet. Returns the document saved.
        """
        check_id("scope", scope)
        check_id("session", session)
        return app_documents.update(self.store, scope, session, name, change)

    def ping(self) -> bool:
        """One cheap read of the store: True when it answers (a failure is logged)."""
        try:
            self.store.get_session("default", "default")
        except StoreError as exc:
            logger.warning("the store %s does not answer: %s", self.url, exc)
            return False
        return True

    def delete_session(self, session_id: str, scope: str = "default") -> bool:
        """Delete one conversation with everything it holds (admin); True if it existed.

        :meth:`Session.delete` does it and returns the receipt.
        """
        return self.session(session_id, scope).delete().counts["sessions"] > 0

    def delete_message(
        self, message_id: int, scope: str = "default", *, rebuild: bool = False
    ) -> Receipt:
        """Forget one stored message of ``scope`` (a tool call with its results); the receipt.

        See :meth:`Session.delete_message`.

        Raises:
            MessageNotFound: no such message in this scope.

        """
        found = self.message(message_id, scope)
        return self.session(found.session, scope).delete_message(message_id, rebuild=rebuild)

    def forget_scope(self, scope: str) -> Receipt:
        """Forget a scope ("forget this user"): delete everything it holds; the receipt.

        Every session, message, state, memory, audit entry and usage row of the scope goes;
        the audit trail keeps one entry with the counts and the receipt. ``receipt.counts``
        says how many ``sessions``, ``messages`` and ``memories`` were deleted.
        """
        check_id("scope", scope)
        return forgetting.forget_scope(self.runtime, scope)

    # -- compaction and memories ------------------------------------------------------

    def activity(self, scope: str, session: str | None = None) -> Activity:
        """Compactions run and prompts sent (against the full history) of a session or scope."""
        check_id("scope", scope)
        self.runtime.prompts.flush()  # this process's waiting turns count too
        if session is None:
            return scope_activity(self.store, scope)
        check_id("session", session)
        return session_activity(self.store, scope, session)

    def memories(self, scope: str = "default") -> Memories:
        """The long-term memories of a scope: create, list, get, update, delete, purge, audit."""
        check_id("scope", scope)
        return self.runtime.memories(scope)

    # -- lifecycle -----------------------------------------------------------------

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no background work is queued or running; False on timeout.

        With a shared job queue this includes every job enqueued by this
        object (compactions and memories), whichever server runs it.
        """
        return self.runtime.scheduler.wait_idle(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Stop background work, close an owned model client, close the store. Safe twice.

        Running background work gets ``timeout`` seconds (default: the
        ``close_timeout`` setting, 30 s) to finish; queued compactions are
        dropped (the next turn asks again), queued memories are written first
        within the same time. False when work was still running at the
        deadline: it is abandoned (compactions commit by compare-and-set;
        shared-queue jobs stay queued for other workers).
        """
        if self._closed:
            return True
        self._closed = True
        finished = self.runtime.close(self.config.close_timeout if timeout is None else timeout)
        if self._owns_llm and self.llm is not None:
            self.llm.close()
            self._owns_llm = False
        self.store.close()
        return finished

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The store's URL, any password masked."""
        return self.store.url

    def __repr__(self) -> str:
        return f"Engram({self.store.url!r})"


def open(
    url: str | None = None,
    *,
    tz: str | None = None,
    llm: LLMClient | str | None = FROM_ENV,
    memory_cap: int | None = None,
    memory_budget: MemoryBudget | None = None,
    run_jobs: bool | None = None,
    embeddings: bool | None = None,
    flagged_text: str | None = None,
    config: Config | None = None,
    **store_options: Any,
) -> Engram:
    """Open Engram on a store URL (default: ``ENGRAM_URL``, else ``sqlite:///./engram.db``).

    ``tz`` (default ``ENGRAM_TZ`` or UTC) is the time zone date phrases are read in.
    ``llm`` is the summarizing model: a client, None (no model), or
    :data:`FROM_ENV` (default: ``ENGRAM_LLM_*`` variables; none set, no model).
    ``memory_cap`` and ``memory_budget`` govern long-term memories.
    ``run_jobs=False`` (PostgreSQL only): enqueue background jobs but leave
    them to other processes' workers. ``embeddings=True`` (``ENGRAM_EMBEDDINGS``,
    the ``embeddings`` extra) embeds messages in the background for
    ``Session.search(mode="semantic" | "hybrid")``. ``flagged_text``
    (``ENGRAM_FLAGGED_TEXT``: ``exclude``, ``keep``, ``keep:scope,...``) says where text
    that reads like instructions to a model is kept out of summaries and memories.
    ``store_options`` go to the
    backend (PostgreSQL: ``timeout`` seconds to wait for a pooled connection,
    default 30; ``min_size``, ``max_size``). Other settings come from
    ``config``, else the environment (see :mod:`engram.config`); the arguments win.
    """
    given: dict[str, Any] = {
        "url": url,
        "tz": tz,
        "memory_cap": memory_cap,
        "run_jobs": run_jobs,
        "embeddings": embeddings,
        "flagged_text": flagged_text,
    }
    if config is None:
        config = Config.from_env(**given)
    else:
        config = config.replace(**{k: v for k, v in given.items() if v is not None})
    with telemetry.memory_span("create_memory_store", None) as traced:
        store = open_store(config.url, **store_options)
        traced.set({"gen_ai.memory.store.id": store.url})  # the URL, its password masked
    try:
        return Engram(store, llm=llm, memory_budget=memory_budget, config=config)
    except BaseException:
        store.close()
        raise
