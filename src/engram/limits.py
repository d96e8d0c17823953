"""Limits shared by several layers (the engine and the tools quote the same numbers)."""

from __future__ import annotations

#: Most messages ``Session.extended`` / ``get_extended_context`` return.
MAX_EXTENDED_CONTEXT = 50

#: Most rows any single store read returns; larger requests are clamped to it.
MAX_PAGE = 1000
