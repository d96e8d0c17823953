"""Deterministic benchmark data: realistic ~200-token messages, cheap to generate by the million.

Words are the single-token English-ish words of ``o200k_base`` (a word list that
ships offline), drawn with a Zipf law over their BPE rank so common words are
common and rare words rare. Drawing 170 words per message with ``random`` would
cost a minute per million messages, so a pool of a few million words is drawn
once and each message joins three slices of it at pseudo-random offsets.

Layout of a dataset of ``total`` messages: the measured session (``bench`` /
``main``) holds ``min(total, MAIN_SESSION_MAX)`` messages; the rest sit in
sessions of ``OTHER_SESSION_SIZE`` messages spread over ``OTHER_SCOPES`` scopes.
Chunks of ``CHUNK`` messages of the main session and of the others are
interleaved, as they would be in a live database.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import random
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

#: Version of the generator: bump when text or layout changes (invalidates cached DBs).
GENERATOR_VERSION = 5
MAIN_SCOPE = "bench"
MAIN_SESSION = "main"
APPEND_SESSION = "append-bench"
MAIN_SESSION_MAX = 100_000
OTHER_SESSION_SIZE = 1_000
OTHER_SCOPES = 10
CHUNK = 1_000
POOL_WORDS = 3_000_000
#: Words per message: BASE + (0..SPREAD-1), three slices; ~200 o200k tokens in all.
WORDS_BASE = 158
WORDS_SPREAD = 40
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)

#: The rare search word: taken out of the vocabulary (with every word containing it,
#: so LIKE's substring match agrees with FTS), then put into one message in
#: RARE_EVERY, chosen by a hash of the message number. With seed 42: none at 1K,
#: 3 hits at 10K, 8 in the 100K-message session, 51 in the 1M-message database
#: (7 of them in the measured session).
#: Fewer hits than a result page is what makes a word rare for search: the LIKE
#: scan then reads the whole session, as it would for a name mentioned twice.
RARE_WORD = "piston"
RARE_EVERY = 20_000
#: Search queries: the rare word, a common one (~1.2% of messages), and two words
#: that rarely meet (the LIKE scan then reads the whole session).
QUERIES = {
    "rare": RARE_WORD,
    "common": "decision",
    "two_words": "pricing decision",
}


@dataclass(frozen=True)
class Spec:
    """What a dataset contains; its key names the cached databases."""

    total: int
    seed: int = 42
    pool_words: int = POOL_WORDS
    version: int = GENERATOR_VERSION

    @property
    def main_size(self) -> int:
        return min(self.total, MAIN_SESSION_MAX)

    def key(self) -> str:
        fields = asdict(self)
        if self.pool_words == POOL_WORDS:
            del fields["pool_words"]  # keeps keys of datasets built before the field existed
        raw = json.dumps(fields, sort_keys=True).encode()
        return f"n{self.total}-" + hashlib.sha256(raw).hexdigest()[:10]


@dataclass(frozen=True)
class Chunk:
    """Consecutive messages of one session: indexes ``start..start+count`` of that session."""

    scope: str
    session: str
    start: int
    count: int
    offset: int  # global message number of the first one (drives the text)


def layout(spec: Spec) -> list[Chunk]:
    """Every chunk of the dataset in insertion order (main-session chunks interleaved)."""
    main: list[Chunk] = []
    for start in range(0, spec.main_size, CHUNK):
        main.append(Chunk(MAIN_SCOPE, MAIN_SESSION, start, min(CHUNK, spec.main_size - start), 0))
    others: list[Chunk] = []
    rest = spec.total - spec.main_size
    k = 0
    while rest > 0:
        size = min(OTHER_SESSION_SIZE, rest)
        scope = f"scope-{k % OTHER_SCOPES}"
        for start in range(0, size, CHUNK):
            others.append(Chunk(scope, f"s-{k}", start, min(CHUNK, size - start), 0))
        rest -= size
        k += 1
    # Spread main chunks evenly among the others.
    ordered: list[Chunk] = []
    if others:
        step = (len(others) + len(main)) / max(len(main), 1)
        mi = oi = 0
        for pos in range(len(main) + len(others)):
            if mi < len(main) and (oi >= len(others) or pos >= mi * step):
                ordered.append(main[mi])
                mi += 1
            else:
                ordered.append(others[oi])
                oi += 1
    else:
        ordered = main
    out: list[Chunk] = []
    offset = 0
    for c in ordered:
        out.append(Chunk(c.scope, c.session, c.start, c.count, offset))
        offset += c.count
    return out


@functools.cache
def _vocabulary() -> tuple[str, ...]:
    from engram.tokens import get_encoding

    enc = get_encoding("o200k_base")
    pattern = re.compile(rb" [a-z]{3,12}")
    words: list[str] = []
    for rank in range(120_000):
        try:
            raw = enc.decode_single_token_bytes(rank)
        except KeyError:
            continue
        if pattern.fullmatch(raw) and RARE_WORD.encode() not in raw:
            words.append(raw[1:].decode())
    return tuple(words)


@functools.cache
def word_pool(seed: int, size: int = POOL_WORDS) -> tuple[str, ...]:
    """A few million words drawn by Zipf's law, with some punctuation attached."""
    words = _vocabulary()
    rng = random.Random(seed)
    weights = list(itertools.accumulate(1.0 / (r + 10) for r in range(len(words))))
    pool = rng.choices(words, cum_weights=weights, k=size)
    # Sentence ends and commas: about one word in twelve.
    marks = rng.choices([".", ",", "", "?"], weights=[5, 4, 90, 1], k=size)
    return tuple(w + m if m else w for w, m in zip(pool, marks, strict=True))


def _mix(n: int, seed: int) -> int:
    """A well-spread 64-bit hash of a message number (splitmix64's finalizer)."""
    h = (n + seed * 0x632BE59BD9B4E019 + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return h ^ (h >> 31)


class TextSource:
    """Message ``n`` of a dataset, in microseconds, reproducibly."""

    def __init__(self, seed: int, pool_words: int = POOL_WORDS) -> None:
        self.seed = seed
        self.pool_words = pool_words
        self.pool = word_pool(seed, pool_words)
        self.span = len(self.pool) - WORDS_BASE - WORDS_SPREAD

    def text(self, n: int) -> str:
        h = (n + 1) * 0x9E3779B97F4A7C15 + self.seed
        h ^= h >> 29
        length = WORDS_BASE + (h % WORDS_SPREAD)
        third = length // 3
        pool = self.pool
        parts = []
        for _ in range(3):
            h = (h * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
            start = (h >> 11) % self.span
            parts.append(" ".join(pool[start : start + third]))
        if _mix(n, self.seed) % RARE_EVERY == 0:
            parts[1] = RARE_WORD + " " + parts[1]
        text = ". ".join(parts)
        return text[0].upper() + text[1:] + "."

    def message(self, chunk: Chunk, i: int) -> dict[str, object]:
        """The ``i``-th message of ``chunk`` in OpenAI format plus ``created_at``."""
        index = chunk.start + i
        return {
            "role": "user" if index % 2 == 0 else "assistant",
            "content": self.text(chunk.offset + i),
            "created_at": BASE_TIME + timedelta(seconds=30 * index),
        }

    def chunk_messages(self, chunk: Chunk) -> list[dict[str, object]]:
        return [self.message(chunk, i) for i in range(chunk.count)]

    def fresh(self, n: int, *, base: int = 10_000_000) -> Iterator[dict[str, object]]:
        """Messages outside every dataset (for appends and import slices)."""
        for i in range(n):
            yield {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": self.text(base + i),
            }
