"""Memory for any OpenAI client: the ``/v1/chat/completions`` proxy's logic.

Point an OpenAI SDK at Engram (``base_url=http://host:8000/v1``, the Engram
key as the API key) and it gets Engram's memory without a code change: the
client sends its messages as it always does (only the new ones, or its whole
list); Engram aligns them with the stored history and stores only what is new
(:mod:`~engram.proxy.align`, :mod:`~engram.proxy.plan`), recognises retries,
serves one turn per session at a time (:mod:`~engram.proxy.serial`), builds
the budgeted context (:mod:`~engram.proxy.budget`), adds its history and
memory tools, calls the configured upstream, runs its own tool calls and
answers in OpenAI's format. The HTTP route lives in
:mod:`engram.server.routes.proxy`; everything it does is here.

The alignment, retry and budget modules work on chat-format messages and know
nothing of the chat-completions body: other fronts reuse them.
"""

from __future__ import annotations

from engram.proxy.budget import Budget, PromptTooLarge, resolve
from engram.proxy.plan import Retry
from engram.proxy.request import ChatRequest, InvalidRequest, parse_request
from engram.proxy.rounds import ProxyTurn, Report
from engram.proxy.serial import SessionBusy, SessionTurns
from engram.proxy.settings import ProxySettings
from engram.proxy.target import MissingSession, Target, find_target
from engram.proxy.upstream import Upstream, UpstreamFailed

__all__ = [
    "Budget",
    "ChatRequest",
    "InvalidRequest",
    "MissingSession",
    "PromptTooLarge",
    "ProxySettings",
    "ProxyTurn",
    "Report",
    "Retry",
    "SessionBusy",
    "SessionTurns",
    "Target",
    "Upstream",
    "UpstreamFailed",
    "find_target",
    "parse_request",
    "resolve",
]
