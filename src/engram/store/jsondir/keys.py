"""The server's API keys in the jsondir backend: one file, ``.api_keys.json``, at the root.

``{"keys": [{"id", "key_hash", "prefix", "label", "admin", "scopes", "writable",
"created_at", "revoked_at"}]}``, written atomically under the store's write
lock (scope folders never start with a dot, so the name cannot clash). Every
process using the directory shares the keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engram.errors import CorruptedData, StoreError
from engram.models import JSON, ApiKeyRecord
from engram.store.common import now as _now
from engram.store.jsondir import document as jsondoc
from engram.store.jsondir.files import JsonDirFiles

KEYS_FILE = ".api_keys.json"


class JsonDirApiKeys(JsonDirFiles):
    """The API key methods of :class:`~engram.store.jsondir.backend.JsonDirStore`."""

    def _key_rows(self) -> list[JSON]:
        path = self.root / KEYS_FILE
        data = self._read_json(path)
        if data is None:
            return []
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise self._corrupt(path, CorruptedData(f"{path}: expected an object with 'keys'"))
        return [dict(row) for row in data["keys"]]

    def _key(self, row: Mapping[str, Any]) -> ApiKeyRecord:
        path = self.root / KEYS_FILE
        try:
            revoked = row.get("revoked_at")
            return ApiKeyRecord(
                id=int(row["id"]),
                prefix=str(row["prefix"]),
                label=str(row.get("label", "")),
                admin=bool(row["admin"]),
                scopes=tuple(str(s) for s in row["scopes"]),
                writable=bool(row["writable"]),
                created_at=jsondoc.parse_time(row["created_at"], f"{path} created_at"),
                revoked_at=jsondoc.parse_time(revoked, f"{path} revoked_at") if revoked else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise self._corrupt(path, CorruptedData(f"{path}: bad API key ({exc})")) from None

    def add_api_key(
        self,
        key_hash: str,
        *,
        prefix: str,
        label: str,
        admin: bool,
        scopes: Sequence[str],
        writable: bool,
    ) -> ApiKeyRecord:
        """Store a new key (its hash); ``key_hash`` is unique."""
        with self._locked():
            rows = self._key_rows()
            if any(row.get("key_hash") == key_hash for row in rows):
                raise StoreError("an API key with this hash already exists")
            row: JSON = {
                "id": max((int(r.get("id", 0)) for r in rows), default=0) + 1,
                "key_hash": key_hash,
                "prefix": prefix,
                "label": label,
                "admin": admin,
                "scopes": list(scopes),
                "writable": writable,
                "created_at": _now().isoformat(),
                "revoked_at": None,
            }
            self._write_json(self.root / KEYS_FILE, {"keys": [*rows, row]})
        return self._key(row)

    def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not, or None."""
        for row in self._key_rows():
            if row.get("key_hash") == key_hash:
                return self._key(row)
        return None

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first, revoked ones included."""
        return sorted((self._key(row) for row in self._key_rows()), key=lambda k: k.id)

    def revoke_api_key(self, key_id: int) -> bool:
        """Revoke a key; True if it existed and was active until now."""
        with self._locked():
            rows = self._key_rows()
            for row in rows:
                if row.get("id") == key_id and not row.get("revoked_at"):
                    row["revoked_at"] = _now().isoformat()
                    self._write_json(self.root / KEYS_FILE, {"keys": rows})
                    return True
        return False
