"""Memory for any OpenAI client: the ``/v1/chat/completions`` proxy's logic.

Point an OpenAI SDK at Engram (``base_url=http://host:8000/v1``, the Engram
key as the API key) and it gets Engram's memory without a code change: the
client sends only its new messages; Engram stores them, builds the budgeted
context, adds its history and memory tools, calls the configured upstream,
runs its own tool calls and answers in OpenAI's format. The HTTP route lives
in :mod:`engram.server.routes.proxy`; everything it does is here.
"""

from __future__ import annotations

from engram.proxy.request import ChatRequest, InvalidRequest, parse_request
from engram.proxy.rounds import ProxyTurn, Report
from engram.proxy.settings import ProxySettings
from engram.proxy.target import MissingSession, Target, find_target
from engram.proxy.upstream import Upstream, UpstreamFailed

__all__ = [
    "ChatRequest",
    "InvalidRequest",
    "MissingSession",
    "ProxySettings",
    "ProxyTurn",
    "Report",
    "Target",
    "Upstream",
    "UpstreamFailed",
    "find_target",
    "parse_request",
]
