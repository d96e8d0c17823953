"""The optional ability to keep the server's API keys in the store itself.

A backend that offers it implements :class:`ApiKeyStore`; every server that
shares the database then shares the keys. Only a hash of each key is stored
(``key_hash``, SHA-256 of the secret): the secret is shown once, when created.
A revoked key stays listed, with ``revoked_at`` set, and never authenticates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from engram.models import ApiKeyRecord


@runtime_checkable
class ApiKeyStore(Protocol):
    """Durable API keys: add, find by hash, list, revoke."""

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
        ...

    def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not, or None."""
        ...

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first, revoked ones included."""
        ...

    def revoke_api_key(self, key_id: int) -> bool:
        """Revoke a key; True if it existed and was active until now."""
        ...


def has_api_keys(store: object) -> TypeGuard[ApiKeyStore]:
    """Tell whether ``store`` can keep API keys."""
    return isinstance(store, ApiKeyStore)


__all__ = ["ApiKeyStore", "has_api_keys"]
