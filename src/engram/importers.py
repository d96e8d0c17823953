"""Reading conversation files into batches of messages, validated before anything is stored.

Three formats are understood:

* **jsonl**: one OpenAI chat message per line, ``{"role", "content"}`` plus
  optional ``name``, ``tool_calls``, ``tool_call_id``, ``created_at`` (ISO 8601
  or Unix seconds), ``session`` (or ``session_id``) and ``metadata``. Blank lines
  are skipped; other keys (``id``, ``scope``, ``tokens`` from Engram's own
  exports) are ignored. A line without a session goes to the default session.
* **document**: Engram's own session documents (``engram export --format
  json``, a jsondir file, or a seed 002 context file), read by
  :mod:`engram.transfer`.
* **chatgpt**: the ``conversations.json`` file of a ChatGPT data export: a list
  of conversations whose ``mapping`` is a tree of nodes. Only the main branch is
  read (the ``parent`` chain from ``current_node`` back to the root); hidden and
  empty nodes are skipped. A tool invocation (an assistant node addressed to a
  tool) and the tool's answer become an assistant ``tool_calls`` message and a
  ``tool`` message, so the pair stays valid OpenAI input.

Parsing is all-or-nothing: :func:`read_import` returns every batch or raises
:class:`~engram.errors.ImportFormatError` naming the file and line (or
conversation) at fault, so the caller can validate the whole file before it
writes a single row. Timestamps without a zone are read as UTC.

Checks made on every message: a known role; string content (a list of text
parts is joined; an assistant message with ``tool_calls`` may have none); no NUL
character and no lone surrogate anywhere (neither can be stored faithfully);
a readable timestamp; well-formed ``tool_calls``; and every ``tool`` message
answers a call made earlier in the same session of the same file.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from engram.errors import ImportFormatError, InvalidMessage
from engram.models import JSON, ROLES, NewMessage
from engram.validation import build_message, check_id

Format = Literal["auto", "jsonl", "finetune", "chatgpt"]

#: Formats :func:`read_import` accepts (``auto`` looks at the content).
FORMATS: tuple[str, ...] = ("auto", "jsonl", "finetune", "chatgpt", "document")

#: What each format looks like, for errors about a file that is none of them.
EXPECTED = (
    "expected JSONL (one OpenAI message object per line), fine-tuning JSONL (one "
    '{"messages": [...]} object per line), a ChatGPT conversations.json (a JSON list of '
    'conversations), or Engram session documents (objects with "recent_history")'
)


#: Metadata key holding a message's import key (see :func:`import_key`).
IMPORT_KEY = "import_key"

#: Largest import file read into memory, in bytes (ChatGPT exports are one JSON document).
MAX_FILE_BYTES = 2 * 1024**3

# Tool names must match what OpenAI accepts in a function call.
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")

# Unix timestamps beyond this are almost surely milliseconds or garbage (year 2286+).
_MAX_UNIX_SECONDS = 10_000_000_000


@dataclass(slots=True)
class ImportBatch:
    """The messages of one session, in order, as OpenAI dicts ready for ``Session.add_many``.

    Each dict may carry ``created_at`` (an aware UTC ``datetime``) and ``metadata``.
    """

    session: str
    messages: list[JSON] = field(default_factory=list)
    title: str | None = None


def read_import(
    path: str | Path,
    *,
    fmt: str = "auto",
    default_session: str | None = None,
) -> list[ImportBatch]:
    """Parse and validate a whole import file; nothing is half-read.

    Args:
        path: The file to read.
        fmt: ``"auto"``, ``"jsonl"`` or ``"chatgpt"``.
        default_session: Session for JSONL lines that name none.

    Returns:
        One batch per session, in order of first appearance.

    Raises:
        ImportFormatError: the file is malformed; the error names file and line.

    """
    path = Path(path)
    label = str(path)
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; use one of {list(FORMATS)}", file=label)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ImportFormatError(
                f"file is {size} bytes, more than the {MAX_FILE_BYTES}-byte limit", file=label
            )
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"cannot read file: {exc.strerror or exc}", file=label) from exc
    if fmt == "auto":
        fmt = detect_format(data, file=label)
    if fmt == "chatgpt":
        return parse_chatgpt(data, file=label)
    if fmt == "finetune":
        return parse_finetune(data, file=label, prefix=default_session or path.stem)
    return parse_jsonl(data, file=label, default_session=default_session)


def read_documents(path: str | Path) -> list[JSON] | None:
    """Engram session documents in a file (``engram export --format json``), or None.

    A file holding one object with ``recent_history`` (a seed 002 / jsondir
    document) or a list of them is a document file; anything else is not.
    """
    path = Path(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    items = data if isinstance(data, list) else [data]
    if items and all(isinstance(i, dict) and "recent_history" in i for i in items):
        return items
    return None


def detect_format(data: bytes, *, file: str = "<input>") -> str:
    """Recognise the format of an import file from its content.

    A JSON list is a ChatGPT export; lines of objects with a ``messages`` list
    are fine-tuning JSONL; other lines of objects are JSONL messages.

    Raises:
        ImportFormatError: the content is one JSON object over several lines,
            or nothing at all: the message says what was recognised and what
            was expected.

    """
    body = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if body[:1] == b"[":
        return "chatgpt"
    if not body:
        raise ImportFormatError(f"the file is empty; {EXPECTED}", file=file)
    first = body.split(b"\n", 1)[0]
    try:
        head = json.loads(first)
    except (ValueError, RecursionError):
        head = None
    if isinstance(head, dict) and isinstance(head.get("messages"), list):
        return "finetune"
    if head is None and body[:1] == b"{":
        try:
            json.loads(body)
        except (ValueError, RecursionError):
            return "jsonl"  # a broken line: the JSONL parser names it
        raise ImportFormatError(
            f"recognised a single JSON object spread over several lines, not a known format; "
            f"{EXPECTED}",
            file=file,
        )
    return "jsonl"


# -- JSONL ------------------------------------------------------------------------------


def parse_jsonl(
    data: bytes, *, file: str = "<input>", default_session: str | None = None
) -> list[ImportBatch]:
    """Parse JSONL bytes of OpenAI-format messages into per-session batches.

    Raises:
        ImportFormatError: on the first malformed line, naming it.

    """
    batches: dict[str, ImportBatch] = {}
    calls: dict[str, set[str]] = {}  # session -> tool call ids seen so far
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue

        def fail(message: str, number: int = number) -> ImportFormatError:
            return ImportFormatError(message, file=file, line=number)

        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise fail(f"invalid UTF-8 at byte {exc.start}") from exc
        obj = _json_line(text, fail)
        if not isinstance(obj, dict):
            raise fail(f"expected a JSON object (one message per line), got {type(obj).__name__}")
        if isinstance(obj.get("messages"), list) and "role" not in obj:
            raise fail(
                'this line is a fine-tuning conversation {"messages": [...]}: use --format finetune'
            )
        session = _session_of(obj, default_session, fail)
        seen = calls.setdefault(session, set())
        try:
            message = _message_from_openai(obj, seen)
        except ValueError as exc:
            raise fail(str(exc)) from exc
        batch = batches.get(session)
        if batch is None:
            batch = batches[session] = ImportBatch(session)
        ident = obj.get("id")
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            ident = None
        batch.messages.append(_keyed(message, ident, len(batch.messages)))
    return list(batches.values())


def _keyed(message: JSON, ident: str | int | None, position: int) -> JSON:
    """``message`` with its import key in the metadata (see :func:`import_key`).

    A key the message already carries (an Engram export of imported messages) is kept.
    """
    given = (message.get("metadata") or {}).get(IMPORT_KEY)
    key = given if isinstance(given, str) else import_key(message, ident=ident, position=position)
    return {**message, "metadata": {**(message.get("metadata") or {}), IMPORT_KEY: key}}


def import_key(message: JSON, *, ident: str | int | None = None, position: int = 0) -> str:
    """The stable key that makes importing the same file twice add nothing the second time.

    A ChatGPT node id, else the line's own ``id``, else a hash of role, content,
    timestamp and position in the session.
    """
    meta = message.get("metadata") or {}
    if meta.get("source") == "chatgpt" and isinstance(meta.get("node"), str):
        return f"chatgpt:{meta['node']}"
    if ident is not None:
        return f"id:{ident}"
    when = message.get("created_at")
    basis = json.dumps(
        [message.get("role"), message.get("content"), str(when) if when else None, position],
        ensure_ascii=True,
    )
    return "hash:" + hashlib.sha256(basis.encode()).hexdigest()[:32]


def _json_line(text: str, fail: Any) -> Any:
    """One line's JSON value; malformed, too deep or too large numbers name the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError:
        raise fail("JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise fail(f"invalid JSON: {exc}") from None


def parse_finetune(
    data: bytes, *, file: str = "<input>", prefix: str = "conversation"
) -> list[ImportBatch]:
    """Parse fine-tuning JSONL: one ``{"messages": [...]}`` conversation per line.

    Each line becomes one session, named by its ``session`` (or ``id``) key, else
    ``<prefix>-<line number>``.

    Raises:
        ImportFormatError: on the first malformed line or message, naming it.

    """
    batches: list[ImportBatch] = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue

        def fail(message: str, number: int = number) -> ImportFormatError:
            return ImportFormatError(message, file=file, line=number)

        try:
            obj = _json_line(raw.decode("utf-8"), fail)
        except UnicodeDecodeError as exc:
            raise fail(f"invalid UTF-8 at byte {exc.start}") from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
            raise fail('expected a fine-tuning line {"messages": [...]}')
        named = obj.get("session", obj.get("id"))
        session = (
            str(named)
            if isinstance(named, str | int) and not isinstance(named, bool)
            else f"{prefix}-{number}"
        )
        _check_session_id(session, fail)
        batch = ImportBatch(session)
        seen: set[str] = set()
        for position, item in enumerate(obj["messages"]):
            if not isinstance(item, dict):
                raise fail(f"messages[{position}]: expected an object, got {type(item).__name__}")
            try:
                message = _message_from_openai(item, seen)
            except ValueError as exc:
                raise fail(f"messages[{position}]: {exc}") from exc
            batch.messages.append(_keyed(message, None, position))
        batches.append(batch)
    return batches


def _session_of(obj: Mapping[str, Any], default: str | None, fail: Any) -> str:
    session = obj.get("session", obj.get("session_id"))
    if session is None:
        if default is None:
            raise fail('message names no session; add a "session" key or pass --session')
        return default
    if not isinstance(session, str | int) or isinstance(session, bool):
        raise fail(f"session must be a string, got {type(session).__name__}")
    session = str(session)
    _check_session_id(session, fail)
    return session


def _check_session_id(session: str, fail: Any) -> None:
    try:
        check_id("session", session)
    except InvalidMessage as exc:
        raise fail(str(exc)) from None


def _message_from_openai(obj: Mapping[str, Any], seen_calls: set[str]) -> JSON:
    """One validated message dict; raises ValueError with a readable reason.

    The engine's own checks (:func:`engram.validation.build_message`) run here,
    so a file that parses cannot be refused later, halfway through the writes.
    """
    role = obj.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {sorted(ROLES)}")
    if "content" not in obj:
        raise ValueError("message has no content")
    content = obj["content"]
    if isinstance(content, list):  # OpenAI multi-part content: keep its text parts
        content = _joined_text_parts(content)
    try:
        created = parse_timestamp(obj["created_at"]) if obj.get("created_at") is not None else None
        built = build_message(
            role,
            content,
            name=obj.get("name"),
            tool_calls=obj.get("tool_calls") or None,
            tool_call_id=obj.get("tool_call_id"),
            created_at=created,
            metadata=obj.get("metadata"),
        )
    except InvalidMessage as exc:
        raise ValueError(str(exc)) from None
    if built.role == "tool" and built.tool_call_id not in seen_calls:
        raise ValueError(
            f"tool message answers call {built.tool_call_id!r}, but no earlier assistant "
            "message in this session made that call"
        )
    if built.tool_calls:
        seen_calls.update(call["id"] for call in built.tool_calls)
    return _as_dict(built, keep_time=created is not None)


def _as_dict(message: NewMessage, *, keep_time: bool) -> JSON:
    out: JSON = {"role": message.role, "content": message.content}
    if message.name is not None:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if keep_time:  # otherwise the engine stamps the time of the write
        out["created_at"] = message.created_at
    if message.metadata:
        out["metadata"] = message.metadata
    return out


def _joined_text_parts(parts: list[Any]) -> str:
    texts = []
    for part in parts:
        if not isinstance(part, dict) or part.get("type") != "text":
            raise ValueError("only text parts are supported in list content")
        if not isinstance(part.get("text"), str):
            raise ValueError("a text part has no text")
        texts.append(part["text"])
    return "\n".join(texts)


def parse_timestamp(value: Any) -> datetime:
    """Read ISO 8601 text or Unix seconds as an aware UTC datetime; naive times are UTC.

    Raises:
        ValueError: the value is not a readable, plausible timestamp.

    """
    if isinstance(value, bool):
        raise ValueError(f"bad timestamp {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or not 0 <= value < _MAX_UNIX_SECONDS:
            raise ValueError(f"bad timestamp {value!r}: not Unix seconds")
        return datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"bad timestamp {value!r}: not ISO 8601") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    raise ValueError(f"bad timestamp {value!r}")


def _is_storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
        return False
    return True


def _check_text(what: str, text: str) -> None:
    if "\x00" in text:
        raise ValueError(f"{what} contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} contains invalid Unicode (a lone surrogate)") from exc


# -- ChatGPT export ---------------------------------------------------------------------


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
    _check_session_id(session, _value_error)
    title = conversation.get("title")
    title = title if isinstance(title, str) and _is_storable(title) else None
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
        return "\n".join(_part_texts(parts))
    text = content.get("text") or content.get("result")
    return text if isinstance(text, str) else ""


def _part_texts(parts: Iterable[Any]) -> Iterator[str]:
    for part in parts:
        if isinstance(part, str):
            if part:
                yield part
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            yield part["text"]  # images and files carry no text: they are left out


__all__ = [
    "FORMATS",
    "IMPORT_KEY",
    "MAX_FILE_BYTES",
    "ImportBatch",
    "detect_format",
    "import_key",
    "parse_chatgpt",
    "parse_finetune",
    "parse_jsonl",
    "parse_timestamp",
    "read_import",
]
