"""An Anthropic Messages request, read once, as the chat request Engram's turn runs.

``messages`` become chat messages the way the library reads the Anthropic
SDK's messages (:func:`engram.intake.blocks.split_anthropic`): ``tool_use``
blocks are an assistant message's tool calls, ``tool_result`` blocks tool
messages, image blocks image parts. ``thinking`` and ``redacted_thinking``
blocks are kept verbatim with their message (:mod:`engram.proxy.verbatim`),
never as text. ``system`` is the call's instructions (not stored), custom
tools the client's tools, ``max_tokens`` the reply reserve. The client's
``cache_control`` markers are dropped: Engram places its own breakpoints.

The request's upstream body (:meth:`AnthropicRequest.upstream_body`) is the
client's own, with Engram's prompt in Anthropic's form
(:func:`engram.context.shapes.anthropic_prompt`: the system part and
Engram's sections, a ``cache_control`` breakpoint after them and one before
the current turn; kept thinking blocks back in their places) and Engram's
tools beside the client's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram import tools
from engram.context.shapes import anthropic_prompt
from engram.intake.blocks import REASONING_BLOCKS, split_anthropic
from engram.intake.validation import plain
from engram.models import JSON
from engram.proxy.request import ChatRequest, InvalidRequest, parse_request
from engram.proxy.verbatim import ANTHROPIC, VERBATIM_KEY, record, record_items

#: Body fields Engram sets itself in the upstream body.
REPLACED = frozenset({"messages", "system", "tools", "tool_choice", "stream"})
#: ``metadata`` keys that only tell Engram the session; never sent upstream.
OURS = frozenset({"session_id", "scope"})
#: Engram's tools in Anthropic's form, by name.
ENGRAM_TOOLS: dict[str, JSON] = {schema["name"]: schema for schema in tools.schemas("anthropic")}


@dataclass(frozen=True, slots=True)
class AnthropicRequest(ChatRequest):
    """A Messages request as a chat request, with what its Anthropic upstream body needs.

    Attributes:
        original_tools: The client's tool definitions as sent, by name.
    """

    original_tools: dict[str, JSON] = field(default_factory=dict)
    keeps: str | None = ANTHROPIC

    def upstream_body(
        self,
        messages: Sequence[JSON],
        offered: Sequence[JSON],
        *,
        turn_start: int | None = None,
        kept: Mapping[int, JSON] | None = None,
    ) -> JSON:
        """The Anthropic body of one upstream call: the client's, with Engram's prompt and tools."""
        body = self.body
        out: JSON = {key: value for key, value in body.items() if key not in REPLACED}
        metadata = out.pop("metadata", None)
        if isinstance(metadata, Mapping):
            theirs = {key: value for key, value in metadata.items() if key not in OURS}
            if theirs:
                out["metadata"] = theirs
        places = {
            index: record_items(kept_record, ANTHROPIC)
            for index, kept_record in (kept or {}).items()
        }
        prompt = anthropic_prompt(messages, turn_start=turn_start, cache=True, kept=places)
        if "system" in prompt:
            out["system"] = prompt["system"]
        out["messages"] = prompt["messages"]
        offered_tools = [self._tool(schema) for schema in offered]
        if offered_tools:
            out["tools"] = offered_tools
            if body.get("tool_choice") is not None:
                out["tool_choice"] = body["tool_choice"]
        if self.stream:
            out["stream"] = True
        return out

    def _tool(self, schema: Mapping[str, Any]) -> JSON:
        name = str((schema.get("function") or {}).get("name"))
        return dict(self.original_tools.get(name) or ENGRAM_TOOLS[name])


def parse_messages(body: object) -> AnthropicRequest:
    """Check a Messages body and turn it into the chat request of its turn.

    Raises:
        InvalidRequest: a field Engram cannot read or honour, named.
        InvalidMessage: a message it cannot store.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object", "body")
    reserve = body.get("max_tokens")
    if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 1:
        raise InvalidRequest(
            f"'max_tokens' must be a positive integer, got {reserve!r:.40}", "max_tokens"
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty list", "messages")
    chat_messages = [*_system(body.get("system"))]
    for index, message in enumerate(messages):
        chat_messages += _message(index, plain(message))
    original_tools = _tools(body.get("tools"))
    chat_body: JSON = {
        "model": body.get("model"),
        "messages": chat_messages,
        "max_tokens": reserve,
        "stream": body.get("stream") is True,
        "stream_options": {"include_usage": True},  # the final event carries the usage
    }
    if original_tools:
        chat_body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": tool.get("description", ""),
                    "parameters": tool.get("input_schema") or {},
                },
            }
            for name, tool in original_tools.items()
        ]
    chat = parse_request(chat_body)
    fields = {f.name: getattr(chat, f.name) for f in dataclasses.fields(ChatRequest)}
    fields.update(body=body, keeps=ANTHROPIC)  # the client's body: its settings go upstream
    return AnthropicRequest(**fields, original_tools=original_tools)


def _system(system: object) -> list[JSON]:
    if system is None or system == "":
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    if not isinstance(system, list):
        raise InvalidRequest("'system' must be text or a list of text blocks", "system")
    parts = []
    for index, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise InvalidRequest(f"system[{index}] must be a text block", f"system[{index}]")
        parts.append({"type": "text", "text": block.get("text")})
    return [{"role": "system", "content": parts}]


def _message(index: int, message: object) -> list[JSON]:
    """One Anthropic message as the chat messages it stands for (thinking kept verbatim)."""
    where = f"messages[{index}]"
    if not isinstance(message, Mapping):
        raise InvalidRequest(f"{where} must be a message object", where)
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise InvalidRequest(
            f"{where}.role must be user or assistant, got {role!r:.40}", f"{where}.role"
        )
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise InvalidRequest(
            f"{where}.content must be text or a list of blocks", f"{where}.content"
        )
    blocks = [_unmarked(f"{where}.content[{at}]", plain(block)) for at, block in enumerate(content)]
    kept = [(at, b) for at, b in enumerate(blocks) if b.get("type") in REASONING_BLOCKS]
    out = split_anthropic({"role": role, "content": blocks})
    kept_record = record(ANTHROPIC, kept)
    if kept_record is not None:
        holder = next((m for m in out if m.get("role") == "assistant"), out[-1])
        holder["metadata"] = {VERBATIM_KEY: kept_record}
    return out


def _unmarked(where: str, block: object) -> JSON:
    """A block without its ``cache_control`` (Engram places its own).

    Raises:
        InvalidRequest: not a block object.
    """
    if not isinstance(block, Mapping):
        raise InvalidRequest(f"{where} must be a content block object", where)
    return {key: value for key, value in block.items() if key != "cache_control"}


def _tools(value: object) -> dict[str, JSON]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise InvalidRequest("'tools' must be a list", "tools")
    out: dict[str, JSON] = {}
    for index, tool in enumerate(value):
        tool = plain(tool)
        kind = tool.get("type", "custom") if isinstance(tool, Mapping) else None
        if kind not in (None, "custom") or not isinstance(tool, Mapping):
            raise InvalidRequest(
                f"tools[{index}] is a {kind!r} tool: Engram proxies custom (client) tools only",
                f"tools[{index}].type",
            )
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"tools[{index}] has no name", f"tools[{index}].name")
        out[name] = _unmarked(f"tools[{index}]", tool)
    return out
