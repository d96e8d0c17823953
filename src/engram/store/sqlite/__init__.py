"""The SQLite backend (the default): one file, WAL, FTS5 search kept by triggers."""
