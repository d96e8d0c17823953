"""The optional ability to keep the dashboard's sign-ins in the store, next to the API keys.

A backend that offers it implements :class:`SignInStore`; every server process
on that database then shares the sign-ins (``engram serve --workers N``,
several servers on one PostgreSQL). A row holds only the SHA-256 of the
sign-in's random id, the id of the API key it belongs to (never the key or its
hash) and when it ends, in seconds since the epoch. A sign-in is worth its key
only while that key is active: :meth:`SignInStore.find_sign_in` answers the
key's record only when the key is not revoked.
"""

from __future__ import annotations

from typing import Protocol, TypeGuard, runtime_checkable

from engram.models import ApiKeyRecord


@runtime_checkable
class SignInStore(Protocol):
    """Durable dashboard sign-ins: add, find, delete; expired ones removed on add."""

    def add_sign_in(
        self, sign_in_hash: str, key_id: int, ends_at: float, *, now: float, limit: int
    ) -> None:
        """Keep a sign-in of key ``key_id`` until ``ends_at``.

        Sign-ins ended by ``now`` are removed first; past ``limit`` rows, the
        ones ending soonest go too, so the table stays bounded.
        """
        ...

    def find_sign_in(self, sign_in_hash: str, now: float) -> ApiKeyRecord | None:
        """The active key of a sign-in not ended by ``now``, or None."""
        ...

    def delete_sign_in(self, sign_in_hash: str) -> None:
        """Delete a sign-in; nothing happens for an unknown one."""
        ...


def has_sign_ins(store: object) -> TypeGuard[SignInStore]:
    """Tell whether ``store`` can keep dashboard sign-ins."""
    return isinstance(store, SignInStore)


__all__ = ["SignInStore", "has_sign_ins"]
