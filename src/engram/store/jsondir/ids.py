"""Id counters of the jsondir backend: unique, increasing ids without an fsync per id.

Two files at the root, both touched only under the store's write lock:

* ``.counters.json``, the durable *ceilings*: ``{"message": 2000, "memory": 1000, ...}``.
  No id above its kind's ceiling was ever handed out. It is written atomically
  (temporary file, fsync, rename, fsync of the directory), once every
  :data:`RESERVE` ids. A directory written before this file had live counters
  holds the last id of each kind here: a valid ceiling too.
* ``.counters.live.json``, the last id handed out of each kind, with the boot id
  of the machine and the ceilings it was drawn under. It is rewritten in place by
  one ``pwrite`` on every draw and never fsynced.

A killed process leaves its last ``pwrite`` in the kernel's page cache, which the
next process reads. Only a power loss or a kernel crash can lose or tear the live
file, and either one changes the boot id (``/proc/sys/kernel/random/boot_id``).
So the live file is trusted only when it was written under the running boot and
under the current ceilings (a program that knew only the ceilings file, such as
an older Engram, may have moved them); otherwise counting resumes above the
ceilings, which every id handed out stays below. Ids remain unique and
increasing; a power loss leaves a gap. Where there is no boot id, every draw
moves the ceiling itself (an fsynced write per draw, as before).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engram.errors import StoreError

COUNTERS = ".counters.json"
LIVE_COUNTERS = ".counters.live.json"
#: Ids reserved by one durable write of the ceilings.
RESERVE = 1000
_LIVE_SIZE = 512  # the live file is padded to at least this many bytes
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot of the machine (Linux), or None where the kernel does not say."""
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


BOOT = boot_id()


def _live(fd: int) -> dict[str, Any]:
    """The live file's content, or {} when it is empty or unreadable (never trusted)."""
    raw = os.pread(fd, max(_LIVE_SIZE, os.fstat(fd).st_size), 0)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _ints(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def draw_ids(
    root: Path,
    kind: str,
    count: int,
    *,
    read_ceilings: Callable[[], dict[str, int]],
    write_ceilings: Callable[[dict[str, int]], None],
) -> list[int]:
    """Draw ``count`` increasing ids of ``kind``; the caller holds the store's write lock.

    ``read_ceilings``/``write_ceilings`` read and durably write ``.counters.json``.

    Raises:
        StoreError: the live counters file cannot be read or written.

    """
    ceilings = read_ceilings()
    path = root / LIVE_COUNTERS
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc}") from exc
    try:
        live = _live(fd)
        trusted = BOOT is not None and live.get("boot") == BOOT
        last = _ints(live.get("last")) if trusted else {}
        if not last or _ints(live.get("ceilings")) != ceilings:
            last = dict(ceilings)  # resume above everything that may have been handed out
        first = last.get(kind, 0) + 1
        last[kind] = first + count - 1
        if last[kind] > ceilings.get(kind, 0):
            reserve = RESERVE if BOOT is not None else 0
            ceilings = {**ceilings, kind: last[kind] + reserve}
            write_ceilings(ceilings)  # durable before any id above the old ceiling is used
        text = json.dumps({"boot": BOOT, "ceilings": ceilings, "last": last}, sort_keys=True)
        data = text.encode("utf-8")
        data += b" " * (max(_LIVE_SIZE, os.fstat(fd).st_size) - len(data) - 1) + b"\n"
        os.pwrite(fd, data, 0)  # one write: a killed process leaves the old or the new text
    except OSError as exc:
        raise StoreError(f"cannot update {path}: {exc}") from exc
    finally:
        os.close(fd)
    return list(range(first, first + count))
