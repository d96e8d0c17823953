"""Search, pure: query plans, indexed text, stems, BM25, dates, vectors (stores import it)."""
