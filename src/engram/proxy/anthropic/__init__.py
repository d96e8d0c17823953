"""Anthropic's Messages API in front of Engram's proxy: ``POST /v1/messages``.

An Anthropic SDK app (or any Claude-based client) pointed at Engram gets the
same memory as a chat app. Its request is read as the chat request Engram's
turn runs (:mod:`~engram.proxy.anthropic.request`); the turn runs unchanged
(alignment, retries, budget, Engram's tool rounds); each upstream call is
sent in Anthropic's format to the Anthropic-format upstream
(:mod:`~engram.proxy.anthropic.upstream`), with Engram's prompt cache
breakpoints after its sections and before the current turn, and its answers
read back (:mod:`~engram.proxy.anthropic.convert`,
:mod:`~engram.proxy.anthropic.events`). ``thinking`` blocks are kept verbatim
with their message and sent back as they came; the usage, with
``cache_read_input_tokens``, is stored with the answer.
"""

from __future__ import annotations

from engram.proxy.anthropic.convert import anthropic_message, chat_completion
from engram.proxy.anthropic.events import UpstreamReader, message_events
from engram.proxy.anthropic.request import AnthropicRequest, parse_messages
from engram.proxy.anthropic.upstream import AnthropicCall, AnthropicUpstream

__all__ = [
    "AnthropicCall",
    "AnthropicRequest",
    "AnthropicUpstream",
    "UpstreamReader",
    "anthropic_message",
    "chat_completion",
    "message_events",
    "parse_messages",
]
