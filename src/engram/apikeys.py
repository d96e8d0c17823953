"""API keys of the server: created, listed, revoked, checked; stored hashed in the store.

A key is ``egk_`` followed by 32 random bytes in URL-safe base64. Only its
SHA-256 hash is stored (a key has 256 bits of entropy, so a fast hash is
enough: nobody can guess one to match), so a stolen database gives no usable
key. ``create`` returns the secret once; afterwards only the record is known.

Rights: an **admin** key may do anything (every scope, deleting sessions and
scopes, managing keys); any other key is bound to one or more scopes and may
read there, and write too unless it was created read-only.
"""

from __future__ import annotations

import builtins
import hashlib
import secrets
from collections.abc import Iterable
from typing import NamedTuple

from engram.errors import ConfigError, NotFound
from engram.intake.validation import check_id
from engram.models import ApiKeyRecord
from engram.store.api_keys import ApiKeyStore

#: Every key starts with this, so secret scanners and people can recognise one.
KEY_PREFIX = "egk_"
#: Characters of a key kept in clear (prefix included) to tell keys apart in listings.
SHOWN_CHARS = 10
#: Longest label of a key.
MAX_LABEL_CHARS = 200


class NewApiKey(NamedTuple):
    """A key just created: the secret (shown once) and its stored record."""

    secret: str
    record: ApiKeyRecord


def hash_key(secret: str) -> str:
    """The stored form of a key: SHA-256 of its UTF-8 bytes, in hex."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


class ApiKeys:
    """The API keys of one store. Obtain it with :meth:`engram.Engram.api_keys`."""

    def __init__(self, store: ApiKeyStore) -> None:
        self._store = store

    def create(
        self,
        *,
        scopes: Iterable[str] = (),
        admin: bool = False,
        read_only: bool = False,
        label: str = "",
    ) -> NewApiKey:
        """Create a key and return its secret (shown only now) with its record.

        Raises:
            ConfigError: an admin key bound to scopes, a key with neither, a
                read-only admin key, or a bad scope id or label.

        """
        bound = tuple(dict.fromkeys(check_id("scope", s) for s in scopes))
        if admin and (bound or read_only):
            raise ConfigError("an admin key reaches every scope and may write; give no --scope")
        if not admin and not bound:
            raise ConfigError("a key needs at least one scope (or make it an admin key)")
        if not isinstance(label, str) or len(label) > MAX_LABEL_CHARS:
            raise ConfigError(f"a key label is text of at most {MAX_LABEL_CHARS} characters")
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        record = self._store.add_api_key(
            hash_key(secret),
            prefix=secret[:SHOWN_CHARS],
            label=label,
            admin=admin,
            scopes=bound,
            writable=admin or not read_only,
        )
        return NewApiKey(secret, record)

    def list(self) -> builtins.list[ApiKeyRecord]:
        """Every key, oldest first, revoked ones included (never the secrets)."""
        return self._store.list_api_keys()

    def active(self) -> builtins.list[ApiKeyRecord]:
        """The keys that still authenticate."""
        return [key for key in self.list() if key.revoked_at is None]

    def revoke(self, key_id: int) -> None:
        """Revoke a key: it never authenticates again.

        Raises:
            NotFound: no active key with this id.

        """
        if not self._store.revoke_api_key(key_id):
            raise NotFound(f"no active API key with id {key_id}")

    def authenticate(self, secret: str) -> ApiKeyRecord | None:
        """The active key this secret is, or None."""
        if not secret.startswith(KEY_PREFIX):
            return None
        record = self._store.find_api_key(hash_key(secret))
        if record is None or record.revoked_at is not None:
            return None
        return record


__all__ = ["KEY_PREFIX", "ApiKeys", "NewApiKey", "hash_key"]
