"""Progressive summary length.

The summary grows with each compaction cycle: ``100 + (version - 1) * 100``
words, as a range 50 words wide, until version 5, where it settles at a cap of
500-750 words.

:func:`is_filler` tells a pleasantry ("Thanks, that's all!") from a sentence
that says something: the offline summary and the extractive memory leave
pleasantries out.
"""

from __future__ import annotations

import re

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
    """Words as the progressive targets count them: ``len(text.split())``."""
    return len(text.split())


#: Words of politeness and acknowledgement: a sentence made only of these says nothing.
PLEASANTRIES = frozenset(
    """thanks thank thx ty ok okay k great perfect lovely cool awesome nice excellent wonderful
    fine good sounds sure yes yeah yep no nope hi hello hey bye goodbye welcome anytime noted
    cheers glad happy appreciate appreciated luck enjoy helpful got it all done please
    morning afternoon evening sorry hear congratulations congrats wow hmm alright right back
    catch point weekend week wish love makes sense later soon talk news trouble""".split()
)
#: Words that may sit around pleasantries without adding anything ("that's all for today").
_GLUE = frozenset(
    """a an the so very much lot lots for you you're youre your that's thats that is it's its
    this me i i'm im we us to again today now then really just too have had day night
    and or of with will be was were am are""".split()
)
_CASED = re.compile(r"[A-Za-z']+")


def is_filler(sentence: str) -> bool:
    """True for a pleasantry that carries no fact ("Thanks, that's all!", "You're welcome, Dana.").

    One capitalized word (a name, as in "Thanks, Dana") may stand beside the pleasantries.
    """
    if any(ch.isdigit() for ch in sentence):
        return False
    words = [w.strip("'") for w in _CASED.findall(sentence)]
    words = [w for w in words if w]
    other = [w for w in words if w.lower() not in PLEASANTRIES and w.lower() not in _GLUE]
    vocative = len(other) == 1 and other[0][:1].isupper() and other[0] is not words[0]
    return any(w.lower() in PLEASANTRIES for w in words) and (not other or vocative)
