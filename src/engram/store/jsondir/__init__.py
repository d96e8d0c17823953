"""The jsondir backend: one human-readable JSON document (and append log) per session."""
