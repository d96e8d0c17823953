"""Progressive summary length (seed 001).

The summary grows with each compaction cycle: ``100 + (version - 1) * 100``
words, as a range 50 words wide, until version 5, where it settles at a cap of
500-750 words.
"""

from __future__ import annotations

from engram.errors import ConfigError

#: Words of the first summary (low end of the range).
BASE_WORDS = 100
#: Words added at each later version.
STEP_WORDS = 100
#: Width of the range below the cap.
RANGE_WORDS = 50
#: From this version on, the range is the cap.
CAP_VERSION = 5
#: The cap: 500-750 words.
CAP_RANGE = (500, 750)


def target_words(version: int) -> tuple[int, int]:
    """Return the (low, high) word range of summary ``version`` (1-based).

    1 -> (100, 150), 2 -> (200, 250), 3 -> (300, 350), 4 -> (400, 450),
    5 and later -> (500, 750).
    """
    if version < 1:
        raise ConfigError(f"summary version starts at 1, got {version}")
    if version >= CAP_VERSION:
        return CAP_RANGE
    low = BASE_WORDS + (version - 1) * STEP_WORDS
    return low, low + RANGE_WORDS


def count_words(text: str) -> int:
    """Words as seed 001 counts them: ``len(text.split())``."""
    return len(text.split())
