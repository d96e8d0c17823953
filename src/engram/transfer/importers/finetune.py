"""Fine-tuning JSONL: one ``{"messages": [...]}`` conversation per line, one session each."""

from __future__ import annotations

from engram.transfer.importers.common import (
    ImportBatch,
    check_session_id,
    json_lines,
    keyed,
    message_from_openai,
)


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
    for number, obj, fail in json_lines(data, file):
        if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
            raise fail('expected a fine-tuning line {"messages": [...]}')
        named = obj.get("session", obj.get("id"))
        session = (
            str(named)
            if isinstance(named, str | int) and not isinstance(named, bool)
            else f"{prefix}-{number}"
        )
        check_session_id(session, fail)
        batch = ImportBatch(session)
        seen: set[str] = set()
        for position, item in enumerate(obj["messages"]):
            if not isinstance(item, dict):
                raise fail(f"messages[{position}]: expected an object, got {type(item).__name__}")
            try:
                message = message_from_openai(item, seen)
            except ValueError as exc:
                raise fail(f"messages[{position}]: {exc}") from exc
            batch.messages.append(keyed(message, None, position))
        batches.append(batch)
    return batches
