"""Peers Engram is compared with.

* :class:`AgentsPeer`: the OpenAI Agents SDK's ``SQLiteSession``, the fastest
  peer we know. It stores items as JSON and keeps no token counts, so a
  prompt that fits a budget is ``get_items(limit=n)`` then a newest-first trim
  counted with tiktoken. We give it its best fair use: ``n`` starts at 32 and
  doubles only while the budget is not met, and counts already taken are not
  redone when a larger window is fetched. (``get_items()`` with no limit reads
  and decodes the whole history: seconds at 100K messages.)
  tiktoken cannot download its vocabulary here, so the encoding comes from
  Engram's offline loader ``engram.tokens.get_encoding``.
* :class:`LikeScan`: the ``content LIKE '%query%'`` search of a first sketch,
  newest first on the ``(session_id, id)`` index, over the floor's table.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from benchmarks.dataset import Chunk, TextSource

TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3
FIRST_WINDOW = 32


def available() -> str | None:
    """None when the Agents SDK imports, else why it cannot be used."""
    try:
        import agents  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the bench extra
        return f"openai-agents not importable ({type(exc).__name__}: {exc})"
    return None


class AgentsPeer:
    """``agents.SQLiteSession`` on one database file, driven from synchronous code."""

    def __init__(self, path: str) -> None:
        from engram.tokens import get_encoding

        self.path = path
        self.loop = asyncio.new_event_loop()
        self._encode = get_encoding("o200k_base").encode_ordinary
        self._roles = {r: len(self._encode(r)) for r in ("system", "user", "assistant", "tool")}
        self._sessions: dict[str, Any] = {}

    def session(self, name: str) -> Any:
        from agents import SQLiteSession

        found = self._sessions.get(name)
        if found is None:
            found = self._sessions[name] = SQLiteSession(name, db_path=self.path)
        return found

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        self.loop.close()

    def add_items(self, name: str, items: list[dict[str, Any]]) -> None:
        self.loop.run_until_complete(self.session(name).add_items(items))

    def _size(self, item: dict[str, Any]) -> int:
        content = item.get("content") or ""
        if not isinstance(content, str):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return (
            TOKENS_PER_MESSAGE
            + self._roles.get(item.get("role", ""), 1)
            + len(self._encode(content))
        )

    def context(self, name: str, budget: int) -> tuple[list[dict[str, Any]], int]:
        """Newest items that fit ``budget``: get_items(limit) doubling, tiktoken counts."""
        session = self.session(name)
        run = self.loop.run_until_complete
        sizes: list[int] = []  # sizes of the newest items, newest first
        total = REPLY_PRIMING
        window = FIRST_WINDOW
        while True:
            items = run(session.get_items(limit=window))
            full = False
            for item in reversed(items[: len(items) - len(sizes)]):
                size = self._size(item)
                if total + size > budget:
                    full = True
                    break
                sizes.append(size)
                total += size
            if full or len(items) < window:
                kept = items[len(items) - len(sizes) :] if sizes else []
                return kept, total
            window *= 2


def build_agents(
    path: str, chunks: Iterable[Chunk], source: TextSource, progress: Any = None
) -> float:
    """Fill a new Agents SDK database through ``add_items``, a chunk per call."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    started = time.perf_counter()
    peer = AgentsPeer(path)
    try:
        current: str | None = None
        for chunk in chunks:
            name = f"{chunk.scope}/{chunk.session}"
            if current is not None and current != name and current in peer._sessions:
                peer._sessions.pop(current).close()  # one open connection at a time
            current = name
            items = [
                {"role": m["role"], "content": m["content"]} for m in source.chunk_messages(chunk)
            ]
            peer.add_items(name, items)
            if progress is not None:
                progress(chunk.count)
    finally:
        peer.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - started


class LikeScan:
    """A first sketch's ``search_history``: a LIKE scan, newest first, no index on the text."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def search(self, sid: int, query: str, limit: int = 10) -> list[tuple[Any, ...]]:
        return self.conn.execute(
            "SELECT id, role, content, created_at FROM messages"
            " WHERE session_id = ? AND content LIKE ? ORDER BY id DESC LIMIT ?",
            (sid, f"%{query}%", limit),
        ).fetchall()
