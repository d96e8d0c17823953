"""Limits shared by several layers (the engine and the tools quote the same numbers)."""

from __future__ import annotations

#: Most messages ``Session.extended`` / ``get_extended_context`` return.
MAX_EXTENDED_CONTEXT = 50

#: Most rows any single store read returns; larger requests are clamped to it.
MAX_PAGE = 1000

#: Largest message or memory id: ids are signed 64-bit integers in every backend.
MAX_ID = 2**63 - 1

#: Largest offset of a page of sessions (REST and dashboard).
MAX_OFFSET = 10_000_000

#: Largest prompt budget or answer reserve taken over HTTP, in tokens.
MAX_BUDGET = 10_000_000
