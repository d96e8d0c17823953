"""Scope-level data of the jsondir backend: memories, their audit trail, LLM usage.

Each lives in one JSON file per scope folder: ``memories.json``,
``audit.json`` (append-only, kept when memories are purged) and
``usage.json`` (one row per LLM call, kept when a session is purged).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from engram.errors import CorruptedData
from engram.models import JSON, MemoryRecord, UsageRecord, frozen_metadata
from engram.store.batch_check import json_value
from engram.store.common import clamp as _clamp
from engram.store.common import now as _now
from engram.store.common import redacted_audit_event, split_audit_event
from engram.store.common import utc as _utc
from engram.store.jsondir import document as jsondoc
from engram.store.jsondir.files import AUDIT_FILE, MEMORIES_FILE, USAGE_FILE, JsonDirFiles
from engram.store.usage_totals import usage_summary


class JsonDirScopeData(JsonDirFiles):
    """The scope-level methods of :class:`~engram.store.jsondir.backend.JsonDirStore`."""

    def _scope_file(self, scope: str, name: str, key: str) -> list[JSON]:
        path = self._scope_dir(scope) / name
        data = self._read_json(path)
        if data is None:
            return []
        if not isinstance(data, dict) or not isinstance(data.get(key), list):
            raise self._corrupt(
                path, CorruptedData(f"{path}: expected an object with a {key!r} list")
            )
        return list(data[key])

    def _write_scope_file(self, scope: str, name: str, key: str, rows: list[JSON]) -> None:
        self._ensure_scope(scope)
        self._write_json(self._scope_dir(scope) / name, {"scope": scope, key: rows})

    def _memories_raw(self, scope: str) -> list[JSON]:
        return self._scope_file(scope, MEMORIES_FILE, "memories")

    def _memory(self, scope: str, row: Mapping[str, Any]) -> MemoryRecord:
        path = self._scope_dir(scope) / MEMORIES_FILE
        try:
            return MemoryRecord(
                id=int(row["id"]),
                scope=scope,
                content=str(row["content"]),
                created_at=jsondoc.parse_time(row["created_at"], f"{path} created_at"),
                updated_at=jsondoc.parse_time(row["updated_at"], f"{path} updated_at"),
                source_session=row.get("source_session"),
                metadata=dict(row.get("metadata") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise self._corrupt(path, CorruptedData(f"{path}: bad memory ({exc})")) from None

    def add_memory(
        self,
        scope: str,
        content: str,
        *,
        source_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> MemoryRecord:
        """Store a new memory for the scope."""
        stamp = _utc(created_at) if created_at is not None else _now()
        with self._locked():
            rows = self._memories_raw(scope)
            (new_id,) = self._next_ids("memory", 1)
            row: JSON = {
                "id": new_id,
                "content": content,
                "source_session": source_session,
                "metadata": json_value(frozen_metadata(metadata), "memory metadata"),
                "created_at": jsondoc.iso(stamp),
                "updated_at": jsondoc.iso(stamp),
            }
            self._write_scope_file(scope, MEMORIES_FILE, "memories", [*rows, row])
            return self._memory(scope, row)

    def list_memories(self, scope: str) -> list[MemoryRecord]:
        """The scope's memories, oldest first (ties by id)."""
        records = [self._memory(scope, row) for row in self._memories_raw(scope)]
        return sorted(records, key=lambda r: (r.created_at, r.id))

    def get_memory(self, scope: str, memory_id: int) -> MemoryRecord | None:
        """One memory, only if it belongs to ``scope``."""
        return next((m for m in self.list_memories(scope) if m.id == memory_id), None)

    def update_memory(
        self,
        scope: str,
        memory_id: int,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord | None:
        """Change content and/or metadata; bumps ``updated_at``. None if not in scope."""
        with self._locked():
            rows = self._memories_raw(scope)
            for i, row in enumerate(rows):
                if int(row.get("id", -1)) != memory_id:
                    continue
                old = self._memory(scope, row)
                new = dict(row)
                if content is not None:
                    new["content"] = content
                if metadata is not None:
                    new["metadata"] = json_value(dict(metadata), "memory metadata")
                new["updated_at"] = jsondoc.iso(max(_now(), old.updated_at))
                rows[i] = new
                self._write_scope_file(scope, MEMORIES_FILE, "memories", rows)
                return self._memory(scope, new)
            return None

    def delete_memory(self, scope: str, memory_id: int) -> bool:
        """Delete one memory of the scope. True if it existed."""
        with self._locked():
            rows = self._memories_raw(scope)
            kept = [row for row in rows if int(row.get("id", -1)) != memory_id]
            if len(kept) == len(rows):
                return False
            self._write_scope_file(scope, MEMORIES_FILE, "memories", kept)
            return True

    def purge_memories(self, scope: str) -> int:
        """Delete every memory of the scope (the audit trail stays). Returns how many."""
        with self._locked():
            rows = self._memories_raw(scope)
            if rows:
                self._write_scope_file(scope, MEMORIES_FILE, "memories", [])
            return len(rows)

    def add_audit(self, scope: str, event: Mapping[str, Any]) -> None:
        """Append an event to the scope's audit trail (an ISO ``at`` in the event is kept)."""
        body, stamp = split_audit_event(json.loads(json.dumps(dict(event), default=str)))
        with self._locked():
            rows = self._scope_file(scope, AUDIT_FILE, "events")
            (new_id,) = self._next_ids("audit", 1)
            rows.append({"id": new_id, "at": jsondoc.iso(stamp), "event": body})
            self._write_scope_file(scope, AUDIT_FILE, "events", rows)

    def list_audit(self, scope: str, *, limit: int = 100) -> list[JSON]:
        """The scope's audit events, newest first; each has ``id`` and ``at`` added."""
        rows = self._scope_file(scope, AUDIT_FILE, "events")
        rows.sort(key=lambda r: int(r.get("id", 0)), reverse=True)
        return [
            {**dict(r.get("event") or {}), "id": int(r["id"]), "at": r["at"]}
            for r in rows[: _clamp(limit)]
        ]

    def redact_audit(self, scope: str, keep: Collection[int]) -> int:
        """Erase the memory text of audit events about memories not in ``keep``; how many."""
        with self._locked():
            rows = self._scope_file(scope, AUDIT_FILE, "events")
            changed = 0
            for row in rows:
                redacted = redacted_audit_event(dict(row.get("event") or {}), keep)
                if redacted is not None:
                    row["event"] = redacted
                    changed += 1
            if changed:
                self._write_scope_file(scope, AUDIT_FILE, "events", rows)
            return changed

    def record_usage(self, scope: str, session: str | None, usage: UsageRecord) -> None:
        """Record one LLM call made on behalf of the scope (and session, if any)."""
        row: JSON = {
            "session": session,
            "model": usage.model,
            "purpose": usage.purpose,
            "input_tokens": int(usage.input_tokens),
            "output_tokens": int(usage.output_tokens),
            "cost_usd": usage.cost_usd,
            "created_at": jsondoc.iso(usage.created_at),
        }
        with self._locked():
            rows = self._scope_file(scope, USAGE_FILE, "calls")
            self._write_scope_file(scope, USAGE_FILE, "calls", [*rows, row])

    def usage_totals(self, scope: str, session: str | None = None) -> JSON:
        """Sums: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, by purpose too."""
        groups: dict[str, list[int | float]] = {}
        for row in self._scope_file(scope, USAGE_FILE, "calls"):
            if session is not None and row.get("session") != session:
                continue
            group = groups.setdefault(str(row.get("purpose")), [0, 0, 0, 0.0])
            group[0] += 1
            group[1] += int(row.get("input_tokens") or 0)
            group[2] += int(row.get("output_tokens") or 0)
            group[3] += float(row.get("cost_usd") or 0.0)
        return usage_summary(
            (p, int(g[0]), int(g[1]), int(g[2]), float(g[3])) for p, g in sorted(groups.items())
        )
