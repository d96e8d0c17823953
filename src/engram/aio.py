"""Engram for asyncio applications: the same verbs, awaited, over the one synchronous core.

::

    import engram

    mem = await engram.open_async("sqlite:///chat.db")
    chat = await mem.session("chat-42", scope="phoenix")
    await chat.add("user", "What did we decide about pricing?")
    ctx = await chat.context(budget=8000, system="You are a project assistant.")

Each coroutine runs the synchronous method of the same name in a worker
thread through :func:`offload`, the one async boundary of Engram (the REST
routes, the proxy, the MCP server and the async chat loop cross it too), as
the Agents SDK's ``SQLiteSession`` runs its SQLite calls in a thread. No logic
lives here: the
wrappers are derived from the synchronous methods (:func:`_threaded`), so
their arguments, results, errors and docstrings are those of
:class:`~engram.engine.Engram`, :class:`~engram.session.Session` and
:class:`~engram.memories.Memories`. The event loop never waits on the store
or on the token counter; the chat loop's async drivers are
:func:`engram.chat.arun_turn` and :func:`engram.chat.stream_turn`.

This module is imported on first use (``engram.open_async``), so ``import
engram`` does not pay for asyncio.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from anyio import to_thread

from engram.agent_state import AgentState
from engram.engine import Engram, open
from engram.memories.records import Outcome as MemoryOutcome
from engram.memories.service import Memories
from engram.policy import Policy
from engram.session import Session

__all__ = ["AsyncEngram", "AsyncMemories", "AsyncSession", "offload", "open_async"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
#: Covariant: a handle on a ``Session`` is a handle on each of its mixins.
S_co = TypeVar("S_co", covariant=True)


async def offload(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run one synchronous call of the core in a worker thread and await its result.

    The only place where async code enters the synchronous core: the store,
    the token counter and background scheduling stay synchronous (one
    implementation), and the event loop is never blocked by them. The thread
    comes from anyio's pool, the one Starlette runs synchronous routes in; a
    cancelled caller waits for the call to finish, so a write is never cut
    halfway.
    """
    return await to_thread.run_sync(functools.partial(func, *args, **kwargs))


class _Threaded(Generic[S_co]):
    """An async handle on one synchronous object (``sync``)."""

    def __init__(self, sync: S_co) -> None:
        self.sync = sync

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"


def _threaded(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[_Threaded[S], P], Coroutine[Any, Any, R]]:
    """The coroutine method that runs ``method`` on the handle's synchronous object."""

    async def call(self: _Threaded[S], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await offload(method, self.sync, *args, **kwargs)

    functools.update_wrapper(call, method)
    call.__qualname__ = f"Async{method.__qualname__}"
    return call


class AsyncMemories(_Threaded[Memories]):
    """The long-term memories of a scope, awaited (see :class:`engram.Memories`)."""

    list = _threaded(Memories.list)
    count = _threaded(Memories.count)
    get = _threaded(Memories.get)
    audit = _threaded(Memories.audit)
    search = _threaded(Memories.search)
    ranked = _threaded(Memories.ranked)
    create = _threaded(Memories.create)
    update = _threaded(Memories.update)
    delete = _threaded(Memories.delete)
    purge = _threaded(Memories.purge)
    clear = _threaded(Memories.clear)
    compact = _threaded(Memories.compact)


class AsyncSession(_Threaded[Session]):
    """One conversation, awaited. Obtain it with :meth:`AsyncEngram.session`.

    ``sync`` is the :class:`engram.Session` it drives (for synchronous code
    that runs in a worker thread, such as a tool).
    """

    @property
    def scope(self) -> str:
        """The scope of the conversation."""
        return self.sync.scope

    @property
    def id(self) -> str:
        """The session id."""
        return self.sync.id

    add = _threaded(Session.add)
    add_many = _threaded(Session.add_many)
    check_many = _threaded(Session.check_many)
    add_checked = _threaded(Session.add_checked)
    info = _threaded(Session.info)
    messages = _threaded(Session.messages)
    context = _threaded(Session.context)
    compact = _threaded(Session.compact)
    compact_later = _threaded(Session.compact_later)
    compaction_state = _threaded(Session.compaction_state)
    prompt_log = _threaded(Session.prompt_log)
    prompts = _threaded(Session.prompts)
    prompt = _threaded(Session.prompt)
    prompt_diff = _threaded(Session.prompt_diff)
    answered = _threaded(Session.answered)
    record_prompt = _threaded(Session.record_prompt)
    agent_state = _threaded(Session.agent_state)
    search = _threaded(Session.search)
    by_date = _threaded(Session.by_date)
    extended = _threaded(Session.extended)
    stats = _threaded(Session.stats)
    title = _threaded(Session.title)
    message = _threaded(Session.message)
    record_usage = _threaded(Session.record_usage)
    record_flags = _threaded(Session.record_flags)
    # edit and regenerate
    pop_answer = _threaded(Session.pop_answer)
    replace_answer = _threaded(Session.replace_answer)
    pop_item = _threaded(Session.pop_item)
    edit = _threaded(Session.edit)
    delete_message = _threaded(Session.delete_message)
    clear = _threaded(Session.clear)
    delete = _threaded(Session.delete)
    date_range = _threaded(Session.date_range)

    async def update_agent_state(self, change: Callable[[AgentState], AgentState]) -> AgentState:
        """Apply ``change`` (a pure function) by compare-and-set, retrying lost races."""
        return await offload(self.sync.update_agent_state, change)

    async def end(self, reason: str = "ended") -> MemoryOutcome:
        """End the conversation and await the memory written of it for the scope.

        Unlike :meth:`engram.Session.end`, which returns a future, this awaits
        the outcome (the memory is still written off the event loop, by the
        background scheduler). To end without waiting, call
        ``asyncio.create_task(chat.end())``.
        """
        future: Future[MemoryOutcome] = await offload(self.sync.end, reason)
        return await asyncio.wrap_future(future)

    def memories(self) -> AsyncMemories:
        """The long-term memories of this session's scope."""
        return AsyncMemories(self.sync.memories())


class AsyncEngram(_Threaded[Engram]):
    """Conversation memory over one store, for asyncio code. Open it with :func:`open_async`.

    ``sync`` is the :class:`engram.Engram` it drives; both may be used at
    once (the core is thread-safe).
    """

    async def session(
        self,
        session_id: str,
        scope: str = "default",
        *,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> AsyncSession:
        """A handle on one conversation (see :meth:`engram.Engram.session`)."""
        return AsyncSession(await offload(self.sync.session, session_id, scope, policy=policy))

    async def require_session(self, session_id: str, scope: str = "default") -> AsyncSession:
        """A handle on a session that exists; raises SessionNotFound otherwise."""
        return AsyncSession(await offload(self.sync.require_session, session_id, scope))

    def memories(self, scope: str = "default") -> AsyncMemories:
        """The long-term memories of a scope."""
        return AsyncMemories(self.sync.memories(scope))

    message = _threaded(Engram.message)
    count = _threaded(Engram.count)
    scopes = _threaded(Engram.scopes)
    sessions = _threaded(Engram.sessions)
    session_info = _threaded(Engram.session_info)
    search = _threaded(Engram.search)
    what_if = _threaded(Engram.what_if)
    export_session = _threaded(Engram.export_session)
    import_documents = _threaded(Engram.import_documents)
    delete_session = _threaded(Engram.delete_session)
    scope_summaries = _threaded(Engram.scope_summaries)
    scope_summary = _threaded(Engram.scope_summary)
    session_page = _threaded(Engram.session_page)
    purge_scope = _threaded(Engram.purge_scope)
    delete_scope = _threaded(Engram.delete_scope)
    usage_totals = _threaded(Engram.usage_totals)
    delete_message = _threaded(Engram.delete_message)
    forget_scope = _threaded(Engram.forget_scope)
    activity = _threaded(Engram.activity)
    app_document = _threaded(Engram.app_document)
    update_app_document = _threaded(Engram.update_app_document)
    wait_idle = _threaded(Engram.wait_idle)
    close = _threaded(Engram.close)

    @property
    def url(self) -> str:
        """The store's URL, any password masked."""
        return self.sync.url

    async def __aenter__(self) -> AsyncEngram:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def open_async(url: str | None = None, **options: Any) -> AsyncEngram:
    """Open Engram for asyncio code: :func:`engram.open` in a worker thread.

    Takes the arguments of :func:`engram.open` (``url``, ``llm``, ``config``,
    store options...). Opening may create the database and run migrations,
    which is why it is awaited.
    """
    return AsyncEngram(await offload(open, url, **options))
