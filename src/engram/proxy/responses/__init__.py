"""The OpenAI Responses API in front of Engram's proxy: ``POST /v1/responses``.

An app on the Responses API (the OpenAI Agents SDK's default model, or
``client.responses.create``) pointed at Engram gets the same memory as a chat
app: its request is read as the chat-completions request Engram's turn runs
(:mod:`~engram.proxy.responses.request`, items as chat messages:
:mod:`~engram.proxy.responses.items`), the turn runs unchanged (alignment,
retries, budget, Engram's tool rounds: :class:`engram.proxy.ProxyTurn`), and
its answer goes back as a ``response`` object (:mod:`~engram.proxy.responses.output`)
or as Responses events (:mod:`~engram.proxy.responses.events`). Response ids
name their conversation (:mod:`~engram.proxy.responses.ids`), so a
``previous_response_id`` finds it. The upstream is spoken to in chat
completions.
"""

from __future__ import annotations

from engram.proxy.responses.events import response_events
from engram.proxy.responses.ids import (
    RESPONSE_ID,
    ResponseRef,
    UnknownResponse,
    new_response_id,
    read_response_id,
)
from engram.proxy.responses.items import chat_messages, output_items
from engram.proxy.responses.output import from_completion, response_object
from engram.proxy.responses.request import ResponsesCall, parse_responses

__all__ = [
    "RESPONSE_ID",
    "ResponseRef",
    "ResponsesCall",
    "UnknownResponse",
    "chat_messages",
    "from_completion",
    "new_response_id",
    "output_items",
    "parse_responses",
    "read_response_id",
    "response_events",
    "response_object",
]
