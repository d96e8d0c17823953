"""Every error Engram raises on purpose.

The tree::

    EngramError
    ├── ConfigError (ValueError)           bad setting, URL or argument
    ├── MissingDependency (ImportError)    an optional extra is not installed
    ├── InvalidMessage (ValueError)        a message Engram refuses to store
    ├── IdempotencyConflict (ValueError)   an idempotency key reused for other messages
    ├── InvalidQuery (ValueError)          a search, date or tool argument it cannot use
    │   └── DateParseError                 a date phrase it cannot read
    ├── ImportFormatError (ValueError)     a malformed import file (names file and line)
    ├── NotFound (LookupError)
    │   ├── SessionNotFound
    │   ├── MessageNotFound
    │   ├── MemoryNotFound
    │   └── TurnNotFound                   no such recorded turn (or its recipe was pruned)
    ├── StoreError                         the storage backend failed
    │   ├── MigrationError
    │   ├── CorruptedData                  a stored document or state cannot be read
    │   ├── ConnectionLost                 the database went away (the pool recovers)
    │   └── Contention                     concurrent writers won every compare-and-set
    └── LLMError                           the model could not be used
        ├── LLMTimeout
        └── LLMBadResponse                 garbage, invalid JSON, wrong shape

Callers catch ``EngramError`` for anything Engram decided; everything else is a bug.
An error about one argument or field names it in ``field`` (``"role"``,
``"messages[1].content"``, ``"session"``), which the server reports as is.
"""

from __future__ import annotations

#: The name Engram is published under on the package index (``import engram`` and the
#: ``engram`` command keep theirs): ``engram`` there is an unrelated project.
DISTRIBUTION = "engram-conversation-memory"


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'engram-conversation-memory[mcp]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class EngramError(Exception):
    """Base class of every error Engram raises on purpose.

    ``field`` names the argument or request field at fault, when there is one.
    """

    field: str | None = None

    def __init__(self, *args: object, field: str | None = None) -> None:
        """The error with its message; ``field`` names the argument at fault, if any."""
        super().__init__(*args)
        if field is not None:
            self.field = field


class ConfigError(EngramError, ValueError):
    """A setting, URL or argument is not usable."""


class MissingDependency(EngramError, ImportError):
    """An optional extra is needed; the message names the one to install."""

    @classmethod
    def extra(cls, what: str, extra: str, cause: ImportError | None = None) -> MissingDependency:
        """``what`` needs ``extra``: the message says how to install it and what was missing.

        Args:
            what: What cannot work, as the user knows it ("engram serve").
            extra: The extra that brings what is missing ("server").
            cause: The failed import, quoted at the end (it names the missing module).

        """
        because = f" ({cause})" if cause is not None else ""
        return cls(f"{what} needs the '{extra}' extra: {install_hint(extra)}{because}")


class InvalidMessage(EngramError, ValueError):
    """A message is refused before anything is written."""


class IdempotencyConflict(EngramError, ValueError):
    """An idempotency key already stored other messages: a retry must resend the same ones.

    Nothing is written. ``key`` is the key.
    """

    field: str | None = "idempotency_key"

    def __init__(self, message: str, *, key: str) -> None:
        """The error for ``key``, reused with messages other than its first ones."""
        super().__init__(message)
        self.key = key


class InvalidQuery(EngramError, ValueError):
    """A search, date or tool argument cannot be used."""


class DateParseError(InvalidQuery):
    """A date or date phrase cannot be read (never silently 'today')."""


class ImportFormatError(EngramError, ValueError):
    """An import file is malformed; nothing from it was written."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None):
        self.file = file
        self.line = line
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        super().__init__(f"{where}{message}")


class NotFound(EngramError, LookupError):
    """Something asked for does not exist in the caller's scope."""


class SessionNotFound(NotFound):
    """No such session in this scope."""

    field: str | None = "session"


class MessageNotFound(NotFound):
    """No such message in this scope."""


class MemoryNotFound(NotFound):
    """No such memory in this scope."""


class TurnNotFound(NotFound):
    """No such recorded turn (or its recipe was pruned) in this session."""


class StoreError(EngramError):
    """The storage backend failed."""


class MigrationError(StoreError):
    """A schema migration failed; the database is left at the previous version."""


class CorruptedData(StoreError):
    """Stored data cannot be read back (bad JSON, wrong types)."""


class ConnectionLost(StoreError):
    """The database connection was lost; retry once the pool has recovered."""


class LLMError(EngramError):
    """The language model could not be used."""


class LLMTimeout(LLMError):
    """The model did not answer in time."""


class LLMBadResponse(LLMError):
    """The model answered with something unusable (invalid JSON, wrong shape)."""


class Contention(StoreError):
    """Concurrent writers won every compare-and-set attempt; nothing was written."""
