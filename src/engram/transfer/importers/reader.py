"""Reading an import file whole: size limit, format detection, then the format's parser."""

from __future__ import annotations

import json
from pathlib import Path

from engram.errors import ImportFormatError
from engram.models import JSON
from engram.transfer.importers.chatgpt import parse_chatgpt
from engram.transfer.importers.common import EXPECTED, FORMATS, MAX_FILE_BYTES, ImportBatch
from engram.transfer.importers.finetune import parse_finetune
from engram.transfer.importers.jsonl import parse_jsonl


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

    A file holding one object with ``recent_history`` (an agent-runtime / jsondir
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
