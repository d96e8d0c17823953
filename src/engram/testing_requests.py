"""What the scripted servers of :mod:`engram.testing` received, request by request."""

from __future__ import annotations

from dataclasses import dataclass, field

from engram.models import JSON

__all__ = ["RecordedRequest"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: JSON | None
    raw: bytes = field(repr=False, default=b"")

    @property
    def messages(self) -> list[JSON]:
        """The chat messages of the request (empty if none)."""
        if not self.body:
            return []
        messages = self.body.get("messages", [])
        return messages if isinstance(messages, list) else []
