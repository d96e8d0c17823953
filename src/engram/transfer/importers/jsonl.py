"""JSONL: one OpenAI chat message per line, each naming its session (or the default)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engram.transfer.importers.common import (
    ImportBatch,
    check_session_id,
    json_lines,
    keyed,
    message_from_openai,
)


def parse_jsonl(
    data: bytes, *, file: str = "<input>", default_session: str | None = None
) -> list[ImportBatch]:
    """Parse JSONL bytes of OpenAI-format messages into per-session batches.

    Raises:
        ImportFormatError: on the first malformed line, naming it.

    """
    batches: dict[str, ImportBatch] = {}
    calls: dict[str, set[str]] = {}  # session -> tool call ids seen so far
    for _number, obj, fail in json_lines(data, file):
        if not isinstance(obj, dict):
            raise fail(f"expected a JSON object (one message per line), got {type(obj).__name__}")
        if isinstance(obj.get("messages"), list) and "role" not in obj:
            raise fail(
                'this line is a fine-tuning conversation {"messages": [...]}: use --format finetune'
            )
        session = _session_of(obj, default_session, fail)
        seen = calls.setdefault(session, set())
        try:
            message = message_from_openai(obj, seen)
        except ValueError as exc:
            raise fail(str(exc)) from exc
        batch = batches.get(session)
        if batch is None:
            batch = batches[session] = ImportBatch(session)
        ident = obj.get("id")
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            ident = None
        batch.messages.append(keyed(message, ident, len(batch.messages)))
    return list(batches.values())


def _session_of(obj: Mapping[str, Any], default: str | None, fail: Any) -> str:
    session = obj.get("session", obj.get("session_id"))
    if session is None:
        if default is None:
            raise fail('message names no session; add a "session" key or pass --session')
        return default
    if not isinstance(session, str | int) or isinstance(session, bool):
        raise fail(f"session must be a string, got {type(session).__name__}")
    session = str(session)
    check_session_id(session, fail)
    return session
