"""Files of the jsondir backend: atomic JSON writes, the store-wide lock, id counters.

Every JSON file is written atomically: a temporary file in the same directory,
fsync, rename over the old one, fsync of the directory (session logs are
appended instead: :mod:`engram.store.jsondir.log`). All writes, from any
thread or process, hold an exclusive ``flock`` on ``.lock``; that is what makes
ids (:mod:`engram.store.jsondir.ids`) unique and increasing across the store.
A file that does not parse is never overwritten: it is set aside as
``<name>.corrupt-<UTC timestamp>``.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from engram.errors import CorruptedData, StoreError
from engram.store.common import now
from engram.store.jsondir.filenames import encode_id
from engram.store.jsondir.ids import COUNTERS, draw_ids

#: A file's (inode, mtime in ns, size): it changes whenever the file is replaced or written.
Signature = tuple[int, int, int]

MARKER = ".engram-jsondir.json"
FORMAT_VERSION = 2
LOCK = ".lock"
SCOPE_FILE = "scope.json"
SESSIONS_DIR = "sessions"
MEMORIES_FILE = "memories.json"
AUDIT_FILE = "audit.json"
USAGE_FILE = "usage.json"


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``: temp file, fsync, rename, fsync the directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode())


#: Where temporary files can be: the root, a scope folder, a scope's sessions folder.
_TMP_PATTERNS = (".*.tmp", "*/.*.tmp", f"*/{SESSIONS_DIR}/.*.tmp")


def remove_orphans(root: Path) -> int:
    """Delete temporary files a crashed writer left behind; the caller holds the write lock.

    Every write holds the lock from creating its temporary file until the
    rename, so under the lock any temporary file is an orphan.
    """
    removed = 0
    for pattern in _TMP_PATTERNS:
        for path in root.glob(pattern):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


class JsonDirFiles:
    """The files and locks under a jsondir root; the base of :class:`JsonDirStore`."""

    def __init__(self, root: str | os.PathLike[str], *, url: str | None = None) -> None:
        """Use (and create if needed) the directory ``root``."""
        self.root = Path(root)
        self.url = url or f"jsondir://{self.root}"
        self._thread_lock = threading.RLock()
        self._held = threading.local()
        self._cache: dict[Path, tuple[Signature, Any]] = {}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            marker = self.root / MARKER
            with self._locked():
                found = self._read_json(marker)
                version = found.get("version") if isinstance(found, dict) else None
                if not isinstance(version, int) or version < FORMAT_VERSION:
                    # version 2: sessions may have append logs, which version 1 readers miss
                    atomic_write_json(
                        marker, {"format": "engram-jsondir", "version": FORMAT_VERSION}
                    )
                remove_orphans(self.root)
        except OSError as exc:
            raise StoreError(f"cannot use {self.root} as a jsondir store: {exc}") from exc

    def close(self) -> None:
        """Nothing stays open between calls; drops the read cache. Safe to call twice."""
        self._cache.clear()

    # -- files and locks ------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive write lock: a thread lock plus ``flock`` for other processes (re-entrant)."""
        with self._thread_lock:
            depth = getattr(self._held, "depth", 0)
            if depth:
                self._held.depth = depth + 1
                try:
                    yield
                finally:
                    self._held.depth -= 1
                return
            with open(self.root / LOCK, "a+b") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                self._held.depth = 1
                try:
                    yield
                finally:
                    self._held.depth = 0
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _scope_dir(self, scope: str) -> Path:
        return self.root / encode_id(scope)

    def _session_path(self, scope: str, session: str) -> Path:
        return self._scope_dir(scope) / SESSIONS_DIR / f"{encode_id(session)}.json"

    def _read_json(self, path: Path) -> Any:
        """Parsed JSON of ``path`` or None if absent; a corrupt file is set aside and reported."""
        return self._read_json_signed(path)[0]

    def _read_json_signed(self, path: Path) -> tuple[Any, Signature | None]:
        """Like :meth:`_read_json`, with the signature of the file that was read."""
        try:
            handle = open(path, encoding="utf-8")
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc}") from exc
        with handle:
            stat = os.fstat(handle.fileno())
            signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            cached = self._cache.get(path)
            if cached is not None and cached[0] == signature:
                return cached[1], signature
            try:
                data = json.load(handle)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                error = exc
            except OSError as exc:
                raise StoreError(f"cannot read {path}: {exc}") from exc
            else:
                self._cache[path] = (signature, data)
                return data, signature
        self._set_aside(path, signature)
        raise CorruptedData(
            f"{path} is not valid JSON ({error}); it was moved aside so nothing overwrites it"
        )

    def _set_aside(self, path: Path, signature: Signature) -> Path | None:
        """Rename a corrupt file to ``*.corrupt-<timestamp>`` (unless a writer replaced it)."""
        with self._locked():
            try:
                stat = path.stat()
            except FileNotFoundError:
                return None
            if (stat.st_ino, stat.st_mtime_ns, stat.st_size) != signature:
                return None  # rewritten meanwhile: not ours to move
            stamp = now().strftime("%Y%m%dT%H%M%S.%fZ")
            target = path.with_name(f"{path.name}.corrupt-{stamp}")
            os.replace(path, target)
            fsync_dir(path.parent)
            self._cache.pop(path, None)
            return target

    def _corrupt(self, path: Path, error: CorruptedData) -> CorruptedData:
        """Set aside a file that parsed but is not a valid document; return the error to raise."""
        try:
            stat = path.stat()
            self._set_aside(path, (stat.st_ino, stat.st_mtime_ns, stat.st_size))
        except FileNotFoundError:
            pass
        return CorruptedData(f"{error}; {path} was moved aside so nothing overwrites it")

    def _write_json(self, path: Path, data: Any) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, data)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc}") from exc
        self._cache.pop(path, None)

    def _ensure_scope(self, scope: str) -> Path:
        folder = self._scope_dir(scope)
        marker = folder / SCOPE_FILE
        if not marker.exists():
            self._write_json(marker, {"scope": scope})
        return folder

    def _next_ids(self, kind: str, count: int) -> list[int]:
        """Draw ``count`` increasing ids of ``kind`` (caller holds the write lock)."""
        return draw_ids(
            self.root,
            kind,
            count,
            read_ceilings=self._ceilings,
            write_ceilings=partial(self._write_json, self.root / COUNTERS),
        )

    def _ceilings(self) -> dict[str, int]:
        path = self.root / COUNTERS
        counters = self._read_json(path) or {}
        if not isinstance(counters, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in counters.values()
        ):
            raise self._corrupt(path, CorruptedData(f"{path} is not an object of integers"))
        return {str(k): int(v) for k, v in counters.items()}
