"""The client's chat-completions request, read once: its messages and what to send upstream.

System (and developer) messages are the instructions of this call, not
history: they become the system prompt of the built context and are not
stored (their text parts joined by the library's rule, with newlines). Every
other message is the client's view of the conversation: only its new
messages, or its whole list; :mod:`engram.proxy.plan` aligns it with the
stored history. The client's ``max_completion_tokens`` (or ``max_tokens``) is
the reserve of the context. The client's tools are offered next to Engram's; a
client tool may not take the name of one of Engram's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram import tools
from engram.chat.loop import DEFAULT_RESERVE, system_prompt
from engram.errors import InvalidMessage, InvalidQuery
from engram.intake.parts import content_text
from engram.models import JSON

#: Body keys Engram replaces or removes before the request goes upstream.
_REPLACED = frozenset({"messages", "tools", "stream", "stream_options"})
#: ``metadata`` keys that only tell Engram the session; never sent upstream.
_OURS = frozenset({"session_id", "scope"})
_INSTRUCTION_ROLES = frozenset({"system", "developer"})


class InvalidRequest(InvalidQuery):
    """A chat-completions request Engram cannot proxy; ``field`` names the culprit."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A client's request, checked.

    Attributes:
        body: The body as sent (never changed).
        model: The model named by the client (passed through unchanged).
        new: The client's other messages (its new ones, or its whole list), in order.
        system: The client's instructions (its system/developer messages), or None.
        reserve: Tokens kept free for the answer.
        reserve_field: The body field that set ``reserve``, or ``reserve`` for the default.
        client_tools: The client's tool schemas, as sent.
        stream: Whether the client wants server-sent events.
        include_usage: Whether the client asked for a final usage chunk.
    """

    body: Mapping[str, Any]
    model: str
    new: list[JSON]
    system: str | None
    reserve: int
    reserve_field: str = "reserve"
    client_tools: list[JSON] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False

    #: The format of the verbatim items the upstream takes back (None: none, chat completions).
    keeps: str | None = None

    @property
    def client_tool_names(self) -> frozenset[str]:
        """Names of the client's own tools."""
        return frozenset(_tool_name(schema) for schema in self.client_tools)

    def upstream_body(
        self,
        messages: Sequence[JSON],
        offered: Sequence[JSON],
        *,
        turn_start: int | None = None,
        kept: Mapping[int, JSON] | None = None,
    ) -> JSON:
        """The body of one upstream call: the client's, with Engram's messages and tools.

        ``turn_start`` (where the current turn begins) and ``kept`` (verbatim
        items by message index) serve upstreams in other formats; chat
        completions have no place for either.
        """
        out: JSON = {key: value for key, value in self.body.items() if key not in _REPLACED}
        metadata = out.pop("metadata", None)
        if isinstance(metadata, Mapping):
            kept = {key: value for key, value in metadata.items() if key not in _OURS}
            if kept:
                out["metadata"] = kept
        out["messages"] = list(messages)
        if offered:
            out["tools"] = list(offered)
        else:
            out.pop("tool_choice", None)  # a tool choice without tools is refused upstream
            out.pop("parallel_tool_calls", None)
        if self.stream:
            out["stream"] = True
            out["stream_options"] = {"include_usage": True}  # usage is summed over rounds
        return out

    def system_prompt(self, with_engram_tools: bool) -> str | None:
        """The client's instructions, followed by the history tools' guide when they are offered."""
        return system_prompt(self.system, with_engram_tools)


def parse_request(body: object) -> ChatRequest:
    """Check a chat-completions body and split it into what Engram needs.

    Raises:
        InvalidRequest: not an object, no model, no messages, a bad reserve,
            ``n`` other than 1, or a client tool named like one of Engram's.
        InvalidMessage: a message that is not an object.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object", "body")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest("'model' must name the upstream model", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty list of the new messages", "messages")
    if body.get("n", 1) != 1:
        raise InvalidRequest("only n=1 is supported: one answer is stored per turn", "n")
    system: list[str] = []
    new: list[JSON] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidMessage(f"messages[{index}] must be an object")
        if message.get("role") in _INSTRUCTION_ROLES:
            system.append(content_text(message.get("content")))
        else:
            new.append(dict(message))
    options = body.get("stream_options")
    reserve, reserve_field = _reserve(body)
    return ChatRequest(
        body=body,
        model=model,
        new=new,
        system="\n\n".join(part for part in system if part) or None,
        reserve=reserve,
        reserve_field=reserve_field,
        client_tools=_client_tools(body.get("tools")),
        stream=body.get("stream") is True,
        include_usage=isinstance(options, Mapping) and options.get("include_usage") is True,
    )


def _reserve(body: Mapping[str, Any]) -> tuple[int, str]:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidRequest(f"'{key}' must be a positive integer, got {value!r}", key)
        return value, key
    return DEFAULT_RESERVE, "reserve"


def _client_tools(value: object) -> list[JSON]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequest("'tools' must be a list", "tools")
    ours = set(tools.TOOLS)
    out = []
    for index, schema in enumerate(value):
        name = _tool_name(schema)
        if not name:
            raise InvalidRequest(f"tools[{index}] has no function name", "tools")
        if name in ours:
            raise InvalidRequest(
                f"tools[{index}] is named {name!r}, the name of one of Engram's own tools", "tools"
            )
        out.append(dict(schema))
    return out


def _tool_name(schema: object) -> str:
    if isinstance(schema, Mapping):
        function = schema.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
    return ""
