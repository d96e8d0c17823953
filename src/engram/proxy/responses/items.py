"""Responses items and chat messages, both ways.

Input items become the chat messages Engram stores:

* a ``message`` item (or a bare ``{"role", "content"}``) is a message of its
  role, its content parts as they are (``input_text``, ``output_text``,
  ``input_image`` are read like chat parts; system and developer messages
  are the call's instructions, never stored);
* consecutive ``message`` (assistant) and ``function_call`` items are one
  assistant message: its text, then its tool calls (``call_id`` is the call's id);
* a ``function_call_output`` is a ``tool`` message answering its ``call_id``;
* every other item (``reasoning`` with its ``encrypted_content``, a
  provider's ``compaction`` item, a hosted tool's call) is kept verbatim
  with the message it comes before (:mod:`engram.proxy.verbatim`), at its
  place among that message's items: never shown as text, never summarised.

An answer goes back as output items: a ``message`` with one ``output_text``
part, then a ``function_call`` per tool call, with the kept items put back at
their places.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engram.intake.parts import content_text, part_text
from engram.intake.validation import plain
from engram.models import JSON
from engram.proxy.request import InvalidRequest
from engram.proxy.verbatim import RESPONSES, VERBATIM_KEY, items_of, record, restore

#: Items that carry conversation Engram stores as chat messages.
CONVERSATION = frozenset({"message", "function_call", "function_call_output"})
#: Items that point at something the provider stored: Engram cannot resolve them.
REFERENCES = frozenset({"item_reference"})
#: Roles a message item may have.
ROLES = frozenset({"user", "assistant", "system", "developer"})
#: Place of items kept after a message's own items (put back at its end).
AT_END = 1 << 20


def chat_messages(items: Sequence[Any]) -> list[JSON]:
    """The chat messages a list of input items stands for, in order.

    Raises:
        InvalidRequest: an item is malformed or cannot be proxied (named by its index).
    """
    reader = _Reader()
    for index, raw in enumerate(items):
        item = plain(raw)
        if not isinstance(item, Mapping):
            raise InvalidRequest(f"input[{index}] must be an item object", f"input[{index}]")
        reader.add(index, item)
    return reader.finish()


class _Reader:
    """Builds chat messages item by item."""

    def __init__(self) -> None:
        self.out: list[JSON] = []
        self.group: JSON | None = None  # the assistant message being built
        self.places = 0  # items of the current message so far (places of kept items)
        self.kept: list[tuple[int, JSON]] = []  # kept items waiting for their message

    def add(self, index: int, item: Mapping[str, Any]) -> None:
        kind = item.get("type") or ("message" if "role" in item else None)
        where = f"input[{index}]"
        if kind == "message":
            self._message(where, item)
        elif kind == "function_call":
            self._call(where, item)
        elif kind == "function_call_output":
            self._close()
            self._emit(
                {
                    "role": "tool",
                    "tool_call_id": _id(where, item, "call_id"),
                    "content": _output(where, item.get("output")),
                }
            )
        elif kind in REFERENCES:
            raise InvalidRequest(
                f"{where} is an item_reference: Engram cannot read the provider's stored items; "
                "send the item itself",
                where,
            )
        elif isinstance(kind, str) and kind:
            self.kept.append((self.places, dict(item)))
            self.places += 1
        else:
            raise InvalidRequest(f"{where} has no type", f"{where}.type")

    def finish(self) -> list[JSON]:
        self._close()
        if self.kept and self.out:  # kept items after the last message: they end it
            _keep(self.out[-1], [(AT_END + at, item) for at, item in self.kept])
            self.kept = []
        return self.out

    def _message(self, where: str, item: Mapping[str, Any]) -> None:
        role = item.get("role")
        if role not in ROLES:
            raise InvalidRequest(
                f"{where}.role must be one of {', '.join(sorted(ROLES))}, got {role!r:.40}",
                f"{where}.role",
            )
        content = item.get("content")
        if not isinstance(content, str | list):
            raise InvalidRequest(
                f"{where}.content must be text or a list of parts", f"{where}.content"
            )
        if role == "assistant":
            self._close()
            self._open()
            assert self.group is not None
            self.group["content"] = content_text(content) if isinstance(content, list) else content
            self.places += 1
            return
        self._close()
        self._emit({"role": role, "content": content})

    def _call(self, where: str, item: Mapping[str, Any]) -> None:
        if self.group is None:
            self._open()
        assert self.group is not None
        self._take_kept(self.group)  # kept items between its items belong to it
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"{where}.name must name the function", f"{where}.name")
        self.group["tool_calls"].append(
            {
                "id": _id(where, item, "call_id"),
                "type": "function",
                "function": {"name": name, "arguments": arguments or ""},
            }
        )
        self.places += 1

    def _open(self) -> None:
        self.group = {"role": "assistant", "content": None, "tool_calls": []}
        self._take_kept(self.group)

    def _close(self) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        if not group["tool_calls"]:
            del group["tool_calls"]
        self.out.append(group)
        # Items kept after its last item belong to what comes next: placed from there.
        self.kept = [(place, item) for place, (_, item) in enumerate(self.kept)]
        self.places = len(self.kept)

    def _emit(self, message: JSON) -> None:
        self._take_kept(message)
        self.out.append(message)
        self.places = 0

    def _take_kept(self, message: JSON) -> None:
        if self.kept:
            _keep(message, self.kept)
            self.kept = []


def _keep(message: JSON, kept: Sequence[tuple[int, JSON]]) -> None:
    """Add kept items to the message's metadata (stored with it)."""
    metadata = message.get("metadata") or {}
    kept_record = record(RESPONSES, [*items_of(metadata, RESPONSES), *kept])
    if kept_record is not None:
        message["metadata"] = {**metadata, VERBATIM_KEY: kept_record}


def _id(where: str, item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{where}.{key} must be the call's id", f"{where}.{key}")
    return value


def _output(where: str, output: object) -> str:
    """The text of a function call's output: a string, or its text parts joined."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if not isinstance(output, list):
        raise InvalidRequest(f"{where}.output must be text or a list of parts", f"{where}.output")
    for index, part in enumerate(output):
        if part_text(part) is None:
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            raise InvalidRequest(
                f"{where}.output[{index}] is a {kind!r} part; a tool result is stored as text",
                f"{where}.output[{index}]",
            )
    return content_text(output)


# -- answers as output items ----------------------------------------------------------


def output_items(message: Mapping[str, Any], base_id: str) -> list[JSON]:
    """An answer (a chat message) as Responses output items, kept items at their places.

    ``base_id`` makes the items' ids (``msg_...``, ``fc_...``): the same answer
    gets the same ids every time it is shown.
    """
    items: list[JSON] = []
    text = content_text(message.get("content"))
    refusal = message.get("refusal")
    if text or isinstance(refusal, str):
        parts: list[JSON] = []
        if text:
            parts.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
        if isinstance(refusal, str) and refusal:
            parts.append({"type": "refusal", "refusal": refusal})
        items.append(message_item(f"msg_{base_id}", parts))
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        items.append(
            call_item(
                f"fc_{base_id}_{index}",
                str(call.get("id")),
                str(function.get("name") or ""),
                str(function.get("arguments") or ""),
            )
        )
    return restore(items, items_of(message, RESPONSES))


def message_item(item_id: str, parts: list[JSON], status: str = "completed") -> JSON:
    """An assistant ``message`` output item."""
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": parts,
    }


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> JSON:
    """A ``function_call`` output item."""
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }
