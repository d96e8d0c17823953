"""Counting many texts at once: one chunk per core, on a pool of threads kept for the process.

tiktoken's encoder releases the GIL while it encodes, so the chunks of a large
batch (an import) count in parallel on whatever cores are free. tiktoken's own
``encode_ordinary_batch`` starts a pool of 8 threads and submits one task per
text on every call: on two busy cores that bookkeeping cost more CPU than the
encoding it spread (80 us against 48 us per 200-token message, counted one by
one). Here the pool lives as long as the process, has one thread per core but
the caller's, and gets one task per chunk; the caller counts the first chunk.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

#: Most threads that count at once (the caller's included).
MAX_THREADS = 8
#: Fewest texts worth a chunk of their own.
MIN_CHUNK = 32

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _threads() -> int:
    return max(1, min(MAX_THREADS, os.cpu_count() or 1))


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_threads() - 1, thread_name_prefix="engram-count")
        return _pool


def count_in_chunks(count: Callable[[str], int], texts: Sequence[str]) -> list[int]:
    """``[count(t) for t in texts]``, in one chunk per core when the batch is large."""
    chunks = min(_threads(), len(texts) // MIN_CHUNK)
    if chunks < 2:
        return [count(t) for t in texts]
    size = -(-len(texts) // chunks)
    parts = [texts[i : i + size] for i in range(0, len(texts), size)]
    pool = _shared_pool()
    futures = [pool.submit(_count_all, count, part) for part in parts[1:]]
    counts = _count_all(count, parts[0])
    for future in futures:
        counts += future.result()
    return counts


def _count_all(count: Callable[[str], int], texts: Sequence[str]) -> list[int]:
    return [count(t) for t in texts]
