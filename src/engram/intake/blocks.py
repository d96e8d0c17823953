"""Anthropic Messages input in OpenAI's chat shape: tool blocks become messages of their own.

Engram stores OpenAI chat messages. A message written by the Anthropic SDK
(or its ``model_dump()``) carries its tool traffic inside ``content`` blocks;
:func:`split_anthropic` turns one such message into the OpenAI messages that
say the same, in order:

* an assistant message with ``tool_use`` blocks becomes one assistant message
  with ``tool_calls`` (``id``, ``name``, ``input`` as JSON arguments) and its
  other blocks as content;
* a user message with ``tool_result`` blocks becomes one ``tool`` message per
  block (``tool_call_id`` = ``tool_use_id``, content = its text), followed by
  a user message with the remaining blocks, if any;
* ``thinking`` and ``redacted_thinking`` blocks are the model's private
  reasoning, not conversation: they are left out.

Image blocks are turned into OpenAI image parts by the content checks
(:func:`engram.intake.checks.content_parts`), so they work in any message.
Anything malformed raises :class:`~engram.errors.InvalidMessage` naming the
block.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engram.errors import InvalidMessage
from engram.intake.parts import join_texts
from engram.models import JSON

__all__ = ["REASONING_BLOCKS", "TOOL_BLOCKS", "has_tool_blocks", "split_anthropic"]

#: Anthropic blocks that hold the model's reasoning: not stored as conversation.
REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
TOOL_BLOCKS = frozenset({"tool_use", "tool_result"})


def _block_type(block: object) -> str | None:
    kind = block.get("type") if isinstance(block, Mapping) else None
    return kind if isinstance(kind, str) else None


def has_tool_blocks(content: object) -> bool:
    """True when ``content`` is a block list holding Anthropic tool or reasoning blocks."""
    if not isinstance(content, list | tuple):
        return False
    return any(_block_type(b) in TOOL_BLOCKS or _block_type(b) in REASONING_BLOCKS for b in content)


def split_anthropic(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI messages (as ``build_message`` arguments) one Anthropic message stands for.

    ``fields`` holds ``role``, ``content`` (a block list) and the other
    arguments of :func:`engram.intake.validation.build_message`; ``created_at`` and
    ``metadata`` are given to every message it becomes.

    Raises:
        InvalidMessage: a tool block is malformed (named by its position).

    """
    role = fields.get("role")
    blocks = [b for b in fields["content"] if _block_type(b) not in REASONING_BLOCKS]
    if role == "assistant":
        return [_assistant(fields, blocks)]
    if role == "user":
        return _user(fields, blocks)
    kinds = sorted({str(_block_type(b)) for b in blocks if _block_type(b) in TOOL_BLOCKS})
    if kinds:
        raise InvalidMessage(
            f"content: {role!r} messages cannot hold {', '.join(kinds)} blocks", field="content"
        )
    return [{**fields, "content": blocks}]


def _assistant(fields: Mapping[str, Any], blocks: list[Any]) -> dict[str, Any]:
    calls = [_tool_call(i, b) for i, b in enumerate(blocks) if _block_type(b) == "tool_use"]
    rest = [b for b in blocks if _block_type(b) != "tool_use"]
    for index, block in enumerate(blocks):
        if _block_type(block) == "tool_result":
            raise InvalidMessage(
                f"content[{index}]: a tool_result block belongs in a user message",
                field=f"content[{index}]",
            )
    if calls and fields.get("tool_calls"):
        raise InvalidMessage(
            "tool_calls: given both as a field and as tool_use blocks", field="tool_calls"
        )
    out = dict(fields)
    if calls:
        out["tool_calls"] = calls
    out["content"] = rest or (None if calls else "")
    return out


def _user(fields: Mapping[str, Any], blocks: list[Any]) -> list[dict[str, Any]]:
    common = {key: fields.get(key) for key in ("created_at", "metadata")}
    out: list[dict[str, Any]] = []
    rest: list[Any] = []
    for index, block in enumerate(blocks):
        kind = _block_type(block)
        if kind == "tool_use":
            raise InvalidMessage(
                f"content[{index}]: a tool_use block belongs in an assistant message",
                field=f"content[{index}]",
            )
        if kind != "tool_result":
            rest.append(block)
            continue
        out.append(
            {
                "role": "tool",
                "tool_call_id": block.get("tool_use_id"),
                "content": _result_text(f"content[{index}]", block.get("content")),
                **common,
            }
        )
    if rest or not out:
        out.append({**fields, "content": rest})
    return out


def _tool_call(index: int, block: Mapping[str, Any]) -> JSON:
    arguments = block.get("input")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidMessage(
            f"content[{index}].input must be an object (tool_use block)",
            field=f"content[{index}].input",
        )
    try:
        text = json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(
            f"content[{index}].input is not JSON: {exc}", field=f"content[{index}].input"
        ) from None
    return {
        "id": block.get("id"),
        "type": "function",
        "function": {"name": block.get("name"), "arguments": text},
    }


def _result_text(where: str, content: object) -> str:
    """The text of a ``tool_result`` block: a string, or its text blocks joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence) or isinstance(content, bytes):
        raise InvalidMessage(
            f"{where}.content must be text or a list of text blocks", field=f"{where}.content"
        )
    texts: list[str] = []
    for index, block in enumerate(content):
        kind = _block_type(block)
        if kind != "text":
            raise InvalidMessage(
                f"{where}.content[{index}] is a {kind!r} block; a tool result is stored as "
                "text (OpenAI tool messages carry no images)",
                field=f"{where}.content[{index}]",
            )
        text = block.get("text")
        if not isinstance(text, str):
            raise InvalidMessage(
                f"{where}.content[{index}].text must be a string",
                field=f"{where}.content[{index}].text",
            )
        texts.append(text)
    return join_texts(texts)
