"""Which conversation a Responses request continues, and from which answer.

The session is named as for chat completions (``X-Engram-Session``,
``metadata.session_id``, ``prompt_cache_key``, ``user``), or by
``previous_response_id``: Engram's response ids carry their conversation
(:mod:`~engram.proxy.responses.ids`). A request naming both must name the
same conversation.

``previous_response_id`` also says where the new input goes: right after that
answer. The answer's client view is put before the request's input, so the
alignment (:mod:`engram.proxy.align`) reads the request as the provider
would: after the newest answer it continues the session; after an earlier
one it repeats a turn (a retry gets the stored answer back, a new request
regenerates it) or forks there (what followed is replaced, through the
audited edit path). An id whose answer the session does not hold (of a call
that stored nothing) continues the session's newest turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engram.models import JSON, Message
from engram.proxy.request import InvalidRequest
from engram.proxy.responses.ids import RESPONSE_ID, read_response_id
from engram.proxy.rounds import is_ours
from engram.proxy.target import MissingSession, Target, find_target
from engram.session import Session

#: Most stored messages searched for the answer a ``previous_response_id`` names.
MAX_SEARCH = 20_000
#: Messages read at a time, newest first.
PAGE = 200


def responses_target(
    headers: Mapping[str, str], body: Mapping[str, Any], previous: str | None
) -> Target:
    """The conversation of a Responses request.

    Raises:
        MissingSession: nothing names it. UnknownResponse: not one of Engram's ids.
        InvalidRequest: the id and the request name different conversations.
    """
    if previous is None:
        return find_target(headers, body)
    ref = read_response_id(previous)
    try:
        named: Target | None = find_target(headers, body)
    except MissingSession:
        named = None
    if named is not None and named.source in ("header", "metadata"):
        if named.session != ref.session or (named.scope is not None and named.scope != ref.scope):
            raise InvalidRequest(
                f"previous_response_id belongs to session {ref.session!r} of scope "
                f"{ref.scope!r}, but the request names session {named.session!r}"
                + (f" of scope {named.scope!r}" if named.scope else ""),
                "previous_response_id",
            )
    return Target(ref.scope, ref.session, "previous_response_id")


def continued_answer(session: Session, response_id: str) -> JSON | None:
    """The client's view of the answer ``response_id`` names, to put before the request's input.

    None when the session holds no such answer (a call that stored nothing, or
    one older than the newest :data:`MAX_SEARCH` messages): the request
    continues the newest turn.
    """
    store, before, read = session.runtime.store, None, 0
    while read < MAX_SEARCH:
        rows = store.tail(session.scope, session.id, limit=PAGE, before_id=before)
        for message in reversed(rows):
            if message.metadata.get(RESPONSE_ID) == response_id and message.role == "assistant":
                return _client_view(message)
        if len(rows) < PAGE:
            return None
        read += len(rows)
        before = rows[0].id
    return None


def _client_view(message: Message) -> JSON:
    calls = [c for c in message.tool_calls or () if not is_ours(_name(c))]
    view: JSON = {"role": "assistant", "content": message.content or None}
    if calls:
        view["tool_calls"] = calls
    return view


def _name(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) else ""
