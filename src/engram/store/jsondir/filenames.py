"""Safe, reversible file names for arbitrary scope and session ids.

The agent runtime stored ``./data/context/<session_id>.json`` with the raw id, so an id
such as ``../x`` or ``a/b`` escaped the directory. Here every id maps to a name
made only of ``a-z 0-9 - _ .`` and ``%XX`` escapes (upper-case hex):

* every other byte of the UTF-8 id is percent-encoded, upper-case letters
  included, so two ids that differ only in case still map to names that
  differ after case folding (safe on case-insensitive file systems);
* a leading ``.`` is escaped (no hidden files, no ``.``/``..``), and so is the
  first character of a Windows device name (``con``, ``nul``, ``com1``...);
* the empty id is the lone name ``%`` (which no other id produces);
* a name longer than :data:`MAX_NAME_CHARS` keeps a readable prefix and ends
  with ``~`` and a hash of the id (``~`` is always escaped otherwise, so the
  marker is unambiguous). Such names cannot be decoded: the real id is stored
  inside each document as well, and that copy is authoritative.
"""

from __future__ import annotations

import hashlib
import string

from engram.errors import CorruptedData

#: Longest encoded name, well under the 255-byte limit of common file systems
#: so that suffixes such as ``.json.corrupt-<timestamp>`` still fit.
MAX_NAME_CHARS = 150
#: Length of the readable prefix kept in an over-long name.
LONG_PREFIX_CHARS = 110
#: Hex digits of the SHA-256 suffix of an over-long name.
HASH_CHARS = 24

_SAFE = frozenset(string.ascii_lowercase + string.digits + "-_.")
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"com{i}" for i in range(10)] + [f"lpt{i}" for i in range(10)]
)
EMPTY_NAME = "%"


def _escape(byte: int) -> str:
    return f"%{byte:02X}"


def encode_id(value: str) -> str:
    """The file-name stem for ``value`` (no extension). Deterministic and injective."""
    if value == "":
        return EMPTY_NAME
    raw = value.encode("utf-8", "surrogatepass")
    parts = [chr(b) if chr(b) in _SAFE else _escape(b) for b in raw]
    if parts[0] == ".":
        parts[0] = _escape(raw[0])
    name = "".join(parts)
    stem = name.split(".", 1)[0]
    if stem in _WINDOWS_DEVICES:
        name = _escape(raw[0]) + name[1:]
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha256(raw).hexdigest()[:HASH_CHARS]
        prefix = name[:LONG_PREFIX_CHARS]
        cut = prefix.rfind("%")
        if cut >= LONG_PREFIX_CHARS - 2:  # do not split an escape in half
            prefix = prefix[:cut]
        name = f"{prefix}~{digest}"
    return name


def is_hashed(name: str) -> bool:
    """True for an over-long name, which cannot be decoded back to its id."""
    return "~" in name


def decode_id(name: str) -> str:
    """The id an :func:`encode_id` name stands for.

    Raises:
        CorruptedData: ``name`` is not a name this module produces (or is a
            hashed one; read the id from the document instead).

    """
    if name == EMPTY_NAME:
        return ""
    if is_hashed(name):
        raise CorruptedData(f"file name {name!r} is hashed; its id is only inside the document")
    out = bytearray()
    i = 0
    while i < len(name):
        char = name[i]
        if char == "%":
            try:
                out.append(int(name[i + 1 : i + 3], 16))
            except ValueError:
                raise CorruptedData(f"bad escape in file name {name!r} at {i}") from None
            i += 3
        elif char.lower() in _SAFE:
            out.append(ord(char.lower()))
            i += 1
        else:
            raise CorruptedData(f"unexpected character {char!r} in file name {name!r}")
    try:
        return out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise CorruptedData(f"file name {name!r} does not decode to UTF-8") from None
