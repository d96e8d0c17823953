"""The PostgreSQL backend: a connection pool, tsvector search, pgvector, a shared job queue."""
