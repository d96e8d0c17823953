"""The neighbour context lifts a message, never above the turn whose words it borrows.

A message's context is the text of the turn it follows (see
:mod:`engram.search.index`). When that turn *states* something ("I adopted a
beagle last month, any tips for crate training?"), the reply after it holds
the same words in its context, and a long reply on the same subject could
overtake the statement itself. Every backend scores a message's own text and
its context apart, then :func:`settle` caps each lifted message just below its
*source* (the turn its context is): the lift can carry a reply above other
messages, never above the turn that holds the words. A reply whose own text
scores higher than its source's own text stays above it (it earned that
alone), and the answer to a turn that only asks is not capped (answers rank
above questions).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from engram.search.index import FLAG_ANSWER

#: Matches scored beyond the number asked for, so a capped hit's place can be taken.
POOL_EXTRA = 10


@dataclass(frozen=True, slots=True)
class Scored:
    """One matching message: its own score and its context's, rank factors applied.

    Scores are higher-is-better. ``lift`` is 0 when the context holds no query word.
    """

    id: int
    own: float
    lift: float
    flags: int = 0

    @property
    def total(self) -> float:
        """The score before :func:`settle`."""
        return self.own + self.lift

    @property
    def capped(self) -> bool:
        """Whether :func:`settle` may cap it: lifted by a context that is not a question."""
        return self.lift > 0 and not self.flags & FLAG_ANSWER


def pool_size(limit: int) -> int:
    """How many matches to score for ``limit`` hits."""
    return limit + POOL_EXTRA


def settle(
    pool: Sequence[Scored],
    sources: Mapping[int, int],
    outside: Mapping[int, Scored] | None = None,
) -> list[tuple[int, float]]:
    """``(id, score)`` of ``pool``, best first, each lifted message capped below its source.

    A message whose own text scores lower than its source's own text ranks below
    the source, however much its context lifts it; one that scores as high on its
    own keeps its place (between equals, the lift decides).

    Args:
        pool: The best matches, in any order.
        sources: The id of each capped message's source turn (see :attr:`Scored.capped`);
            a message missing here is not capped.
        outside: Sources that are not in ``pool`` but match with the same filters (a
            source that does not match, or is filtered out, caps nothing).
    """
    inside = {item.id: item for item in pool}
    final: dict[int, float] = {}
    for item in sorted(pool, key=lambda s: s.id):  # a source comes before its reply
        score = item.total
        source_id = sources.get(item.id) if item.capped else None
        source = None
        if source_id is not None:
            source = inside.get(source_id) or (outside or {}).get(source_id)
        if source is not None and item.own < source.own:
            cap = final.get(source.id, source.total)
            if score >= cap:
                score = math.nextafter(cap, -math.inf)
        final[item.id] = score
    return sorted(final.items(), key=lambda pair: (-pair[1], -pair[0]))


def missing_sources(pool: Iterable[Scored], sources: Mapping[int, int]) -> list[int]:
    """The sources of capped members of ``pool`` that are not in it themselves."""
    inside = {item.id for item in pool}
    wanted = {sources[i.id] for i in pool if i.capped and i.id in sources}
    return sorted(wanted - inside)


__all__ = ["POOL_EXTRA", "Scored", "missing_sources", "pool_size", "settle"]
