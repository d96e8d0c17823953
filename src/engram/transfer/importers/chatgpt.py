"""ChatGPT export: ``conversations.json``, the main branch of each conversation's tree."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from engram.errors import ImportFormatError, InvalidMessage
from engram.intake.parts import join_texts
from engram.intake.validation import build_message
from engram.models import JSON, ROLES
from engram.transfer.importers.common import (
    EXPECTED,
    IMPORT_KEY,
    ImportBatch,
    check_session_id,
    is_storable,
    parse_timestamp,
)

# Tool names must match what OpenAI accepts in a function call.
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


def parse_chatgpt(data: bytes, *, file: str = "conversations.json") -> list[ImportBatch]:
    """Parse ChatGPT's ``conversations.json`` into one batch per conversation.

    Raises:
        ImportFormatError: the document is not a ChatGPT export or a node is unusable.

    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportFormatError(f"invalid UTF-8 at byte {exc.start}", file=file, line=line) from exc
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"invalid JSON: {exc.msg}", file=file, line=exc.lineno) from exc
    except RecursionError:
        raise ImportFormatError("JSON nested too deeply", file=file) from None
    except ValueError as exc:
        raise ImportFormatError(f"invalid JSON: {exc}", file=file) from None
    if not isinstance(doc, list):
        raise ImportFormatError(
            f"recognised a JSON {type(doc).__name__}, not a ChatGPT export; {EXPECTED}", file=file
        )
    batches: list[ImportBatch] = []
    sessions: set[str] = set()
    for index, conversation in enumerate(doc):
        try:
            batch = _conversation(conversation, index)
        except ValueError as exc:
            raise ImportFormatError(f"conversation #{index}: {exc}", file=file) from exc
        if batch.session in sessions:
            raise ImportFormatError(
                f"conversation #{index}: id {batch.session!r} appears twice", file=file
            )
        sessions.add(batch.session)
        if batch.messages:
            batches.append(batch)
    return batches


def _conversation(conversation: Any, index: int) -> ImportBatch:
    if not isinstance(conversation, dict) or not isinstance(conversation.get("mapping"), dict):
        raise ValueError("not a ChatGPT conversation (no 'mapping')")
    session = conversation.get("conversation_id") or conversation.get("id")
    if not isinstance(session, str):
        raise ValueError("has no conversation id")
    check_session_id(session, _value_error)
    title = conversation.get("title")
    title = title if isinstance(title, str) and is_storable(title) else None
    batch = ImportBatch(session, title=title)
    fallback_time = _optional_time(conversation.get("create_time"))
    pending: JSON | None = None  # an assistant call to a tool, waiting for its answer
    for node_id, message in _main_branch(conversation["mapping"], conversation.get("current_node")):
        when = _optional_time(message.get("create_time")) or fallback_time
        fallback_time = when
        try:
            converted = _chatgpt_message(message, node_id, title, when)
        except ValueError as exc:
            raise ValueError(f"node {node_id!r}: {exc}") from exc
        if converted is None:
            continue
        kind, payload = converted
        if kind == "call":
            pending = payload
        elif kind == "result":
            if pending is None:
                continue  # a tool output nobody asked for in OpenAI terms (browsing display)
            payload["tool_call_id"] = pending["tool_calls"][0]["id"]
            batch.messages.extend([_checked(pending), _checked(payload)])
            pending = None
        else:
            pending = None  # a call that never got its answer would be invalid input: drop it
            batch.messages.append(_checked(payload))
    return batch


def _checked(message: JSON) -> JSON:
    """Run the engine's own checks on a message, so the write cannot refuse it later."""
    try:
        build_message(
            message["role"],
            message["content"],
            name=message.get("name"),
            tool_calls=message.get("tool_calls"),
            tool_call_id=message.get("tool_call_id"),
            created_at=message.get("created_at"),
            metadata=message.get("metadata"),
        )
    except InvalidMessage as exc:
        node = message.get("metadata", {}).get("node")
        raise ValueError(f"node {node!r}: {exc}") from None
    return message


def _value_error(message: str) -> ValueError:
    return ValueError(message)


def _main_branch(mapping: Mapping[str, Any], current: Any) -> list[tuple[str, JSON]]:
    """Nodes from the root to ``current_node`` (or the last leaf), with their messages."""
    if not isinstance(current, str) or current not in mapping:
        current = _last_leaf(mapping)
    chain: list[tuple[str, JSON]] = []
    seen: set[str] = set()
    node_id: Any = current
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            raise ValueError(f"node {node_id!r} is its own ancestor")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise ValueError(f"node {node_id!r} is not an object")
        message = node.get("message")
        if isinstance(message, dict):
            chain.append((node_id, message))
        node_id = node.get("parent")
    chain.reverse()
    return chain


def _last_leaf(mapping: Mapping[str, Any]) -> str | None:
    leaves = [
        key for key, node in mapping.items() if isinstance(node, dict) and not node.get("children")
    ]
    return leaves[-1] if leaves else None


def _optional_time(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def _chatgpt_message(
    message: Mapping[str, Any], node_id: str, title: str | None, when: datetime | None
) -> tuple[str, JSON] | None:
    """("text" | "call" | "result", message dict), or None for nodes to skip."""
    author = message.get("author") or {}
    role = author.get("role") if isinstance(author, dict) else None
    meta = message.get("metadata") or {}
    if isinstance(meta, dict) and meta.get("is_visually_hidden_from_conversation"):
        return None
    if role not in ROLES:
        return None  # exports grow new author kinds; they carry nothing a chat model reads
    text = _chatgpt_text(message.get("content"))
    if not text.strip():
        return None
    metadata: JSON = {"source": "chatgpt", "node": node_id, IMPORT_KEY: f"chatgpt:{node_id}"}
    if title:
        metadata["title"] = title
    out: JSON = {"role": role, "content": text, "metadata": metadata}
    if when is not None:
        out["created_at"] = when
    recipient = message.get("recipient", "all")
    if role == "assistant" and isinstance(recipient, str) and recipient != "all":
        tool = _TOOL_NAME.sub("_", recipient)[:64] or "tool"
        out["content"] = ""
        out["tool_calls"] = [
            {
                "id": f"call_{node_id}"[:64],
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps({"input": text})},
            }
        ]
        return "call", out
    if role == "tool":
        name = author.get("name")
        if isinstance(name, str) and name:
            out["name"] = _TOOL_NAME.sub("_", name)[:64]
        return "result", out
    if role == "system" and not text.strip():
        return None
    return "text", out


def _chatgpt_text(content: Any) -> str:
    """Extract the readable text of a ChatGPT content object (text parts, code, output)."""
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        return join_texts(_part_texts(parts))
    text = content.get("text") or content.get("result")
    return text if isinstance(text, str) else ""


def _part_texts(parts: Iterable[Any]) -> Iterator[str]:
    for part in parts:
        if isinstance(part, str):
            if part:
                yield part
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            yield part["text"]  # images and files carry no text: they are left out
