"""The compare-and-set loop every session state document is updated with.

Session state documents (compaction, agent state, tool cache, lifecycle) are
saved with the version that was read; a save that finds a newer version fails
and the update starts again from a fresh read. ``change`` may therefore run
several times and must be a pure function of the state it is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from engram.errors import Contention

T = TypeVar("T")

#: Attempts before an update gives up (each lost race reads again).
MAX_ATTEMPTS = 20
#: Longest pause between two attempts, in seconds (the pause doubles from 1 ms).
MAX_PAUSE = 0.05


def compare_and_set(
    load: Callable[[], tuple[T, int]],
    change: Callable[[T], T | None],
    save: Callable[[T, int], bool],
    *,
    what: str,
    attempts: int = MAX_ATTEMPTS,
) -> T:
    """Load, apply ``change``, save with the version read; retry lost races.

    Args:
        load: Returns the current value and its version (0: never saved).
        change: The new value, or None for "nothing to write" (the current
            value is returned as it is).
        save: Saves a value if the stored version is still the one given;
            True when it did.
        what: Names the document in the error ("agent state of p/s").
        attempts: Races lost before giving up.

    Raises:
        Contention: every attempt lost its race.

    """
    for attempt in range(attempts):
        current, version = load()
        new = change(current)
        if new is None:
            return current
        if save(new, version):
            return new
        time.sleep(min(0.001 * 2**attempt, MAX_PAUSE))
    raise Contention(f"{what}: {attempts} concurrent updates won every race; giving up")
