"""The server's API keys in the in-process store (``memory://NAME``).

Kept per store name, like the rest of that store's data, so every open of the
same name (every test server in one process) shares them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from engram.errors import StoreError
from engram.models import ApiKeyRecord

_KEYS: dict[str, dict[str, ApiKeyRecord]] = {}
_GUARD = threading.Lock()


class MemoryApiKeys:
    """The API key methods of :class:`~engram.store.memory.backend.MemoryStore`."""

    url: str

    def _keys(self) -> dict[str, ApiKeyRecord]:
        return _KEYS.setdefault(self.url, {})

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
        with _GUARD:
            keys = self._keys()
            if key_hash in keys:
                raise StoreError("an API key with this hash already exists")
            record = ApiKeyRecord(
                id=len(keys) + 1,
                prefix=prefix,
                label=label,
                admin=admin,
                scopes=tuple(scopes),
                writable=writable,
                created_at=datetime.now(UTC),
            )
            keys[key_hash] = record
            return record

    def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not, or None."""
        with _GUARD:
            return self._keys().get(key_hash)

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first, revoked ones included."""
        with _GUARD:
            return sorted(self._keys().values(), key=lambda k: k.id)

    def revoke_api_key(self, key_id: int) -> bool:
        """Revoke a key; True if it existed and was active until now."""
        with _GUARD:
            keys = self._keys()
            for key_hash, record in keys.items():
                if record.id == key_id and record.revoked_at is None:
                    keys[key_hash] = replace(record, revoked_at=datetime.now(UTC))
                    return True
            return False
