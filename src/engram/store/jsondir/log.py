r"""The append log of a jsondir session: where new messages go between document rewrites.

Rewriting a whole session document for every message costs time in proportion
to the history, so an ``append`` writes its batch as one line at the end of
``<session>.jsonl`` beside ``<session>.json``, and fsyncs that file only. The
log is JSON Lines, one object per line: a header, then one record per batch::

    {"format": "engram.session-log", "format_version": 1, "scope": "p",
     "session_id": "s", "generation": "3f2a9c1e0b7d4a55"}
    {"at": "2026-11-25T05:00:00.1+00:00", "messages": [<recent_history entry>, ...]}

A document names the log generation that continues it (``log_generation``);
a log with another generation (left by a crash between a rewrite of the
document and the removal of the old log, or by a purged session) is ignored,
so every message is in exactly one of the two files. Rewriting the document
(a state change, a deletion, or the log outgrowing the document) folds the log
into it and starts a new generation.

A record is one ``write``: a process killed mid-way leaves at most a torn last
line, which readers ignore (it was never acknowledged) and the next writer cuts
off before appending. Lines split on ``\n`` bytes only (JSON escapes it inside
strings), never on the other characters ``str.splitlines`` treats as breaks.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.errors import CorruptedData, StoreError
from engram.store.jsondir.files import atomic_write_bytes

LOG_FORMAT = "engram.session-log"
LOG_FORMAT_VERSION = 1
LOG_SUFFIX = ".jsonl"
#: A log is folded into its document once it is larger than this and than the document.
FOLD_MIN_BYTES = 256 * 1024


def log_path(document: Path) -> Path:
    """``<session>.jsonl`` beside the session document ``<session>.json``."""
    return document.with_suffix(LOG_SUFFIX)


def new_generation() -> str:
    """A fresh log generation: random, so a recreated session never reuses one."""
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class LogView:
    """What a log held when read: its generation and the complete records, in order.

    ``offset`` is the end of the last complete record (the next append starts
    there); ``size`` is the file's size when read (larger when a torn line follows).
    """

    generation: str | None = None
    header: bytes = b""
    offset: int = 0
    size: int = 0
    records: tuple[dict[str, Any], ...] = field(default=())


NO_LOG = LogView()


def _encode(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def header_line(scope: str, session: str, generation: str) -> bytes:
    """The first line of a new log."""
    return _encode(
        {
            "format": LOG_FORMAT,
            "format_version": LOG_FORMAT_VERSION,
            "scope": scope,
            "session_id": session,
            "generation": generation,
        }
    )


def record_line(at: str, entries: list[Any]) -> bytes:
    """One batch of ``recent_history`` entries, appended at ``at`` (ISO time)."""
    return _encode({"at": at, "messages": entries})


def _header(line: bytes) -> str | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != LOG_FORMAT:
        return None
    generation = data.get("generation")
    return generation if isinstance(generation, str) else None


def _records(path: Path, data: bytes, start: int) -> tuple[list[dict[str, Any]], int]:
    """Parse complete lines of ``data`` (which begins at byte ``start``); returns their end.

    A line that does not parse is a torn tail when nothing valid follows it;
    followed by a valid record it is damage, and the log is reported corrupt.
    """
    out: list[dict[str, Any]] = []
    end = start
    torn = False
    lines = data.split(b"\n")
    for line in lines[:-1]:  # the last piece has no newline yet: not a complete record
        try:
            record = json.loads(line)
        except ValueError:
            torn = True
            continue
        if torn:
            raise CorruptedData(f"{path}: an unreadable line before readable records")
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise CorruptedData(f"{path}: a log record without a 'messages' list")
        out.append(record)
        end += len(line) + 1
    return out, end


def read_log(path: Path, cached: LogView | None = None) -> LogView:
    """The log at ``path`` (:data:`NO_LOG` when absent); reads only what follows ``cached``.

    Raises:
        CorruptedData: a record is damaged in the middle of the log.
        StoreError: the file cannot be read.

    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return NO_LOG
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    try:
        size = os.fstat(fd).st_size
        if (
            cached is not None
            and cached.generation is not None
            and size >= cached.offset
            and os.pread(fd, len(cached.header), 0) == cached.header
        ):
            if size == cached.size:
                return cached
            new, end = _records(
                path, os.pread(fd, size - cached.offset, cached.offset), cached.offset
            )
            return LogView(cached.generation, cached.header, end, size, cached.records + tuple(new))
        data = os.pread(fd, size, 0)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    finally:
        os.close(fd)
    first, newline, rest = data.partition(b"\n")
    generation = _header(first) if newline else None
    if generation is None:
        return LogView(size=size)  # no complete header: a torn creation, holding nothing
    header = first + newline
    records, end = _records(path, rest, len(header))
    return LogView(generation, header, end, size, tuple(records))


def _sync(fd: int) -> None:
    getattr(os, "fdatasync", os.fsync)(fd)


def append_log(
    path: Path, view: LogView, lines: list[bytes], *, generation: str, header: bytes
) -> LogView:
    """Append ``lines`` to the log ``view`` was read from (under the write lock), durably.

    When ``view`` is not a log of ``generation`` (absent, stale, torn), a new
    log of ``header`` plus ``lines`` replaces it atomically instead. Any failure
    cuts the log back to what it was, so a refused append leaves nothing.

    Raises:
        StoreError: the log cannot be written or synced (nothing was appended).

    """
    data = b"".join(lines)
    if view.generation != generation:
        try:
            atomic_write_bytes(path, header + data)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc}") from exc
        return read_log(path)
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as exc:
        raise StoreError(f"cannot append to {path}: {exc}") from exc
    try:
        if view.size != view.offset:
            os.ftruncate(fd, view.offset)  # a torn record a killed writer left
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], view.offset + written)
        _sync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, view.offset)
        except OSError:
            pass
        raise StoreError(f"cannot append to {path}: {exc}") from exc
    finally:
        os.close(fd)
    records = [json.loads(line) for line in lines]
    end = view.offset + len(data)
    return LogView(view.generation, view.header, end, end, view.records + tuple(records))


def remove_log(path: Path) -> None:
    """Delete a log that its document has absorbed (a stale one is ignored anyway)."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot delete {path}: {exc}") from exc


def should_fold(view: LogView, document_size: int) -> bool:
    """True once the log outgrows both :data:`FOLD_MIN_BYTES` and its document.

    Folding then costs a document rewrite per doubling of the history: constant
    time per message on average.
    """
    return view.offset > max(FOLD_MIN_BYTES, document_size)
