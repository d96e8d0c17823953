"""Images in messages: data URLs and the pixel size written in an image's header.

Pure functions, no I/O: a remote ``http(s)`` image is never fetched, so its
size is unknown here (the token counter then counts the rule's upper bound,
see :func:`engram.tokens.image_tokens`). The size of a ``data:`` URL is read
from the image header (PNG, JPEG, GIF, WebP) with the ``imagesize`` package,
imported on first use.
"""

from __future__ import annotations

import binascii
import io
import re

from engram.intake.parts import join_texts

__all__ = ["DataURL", "describe", "image_size", "parse_data_url", "readable"]

#: ``data:<media type>[;params];base64,<payload>``; the media type is lower-cased on read.
_DATA_URL = re.compile(r"data:([^;,]+)((?:;[^;,]*)*?);base64,", re.IGNORECASE)
#: Base64 characters decoded first when looking for a header (48 KiB of image).
_HEADER_CHARS = 65_536


class DataURL:
    """A base64 ``data:`` URL split into its media type and payload (not yet decoded)."""

    __slots__ = ("media_type", "payload")

    def __init__(self, media_type: str, payload: str):
        self.media_type = media_type
        self.payload = payload

    def decode(self, limit: int | None = None) -> bytes:
        """The payload's bytes (only the first ``limit`` base64 characters when given).

        Raises:
            ValueError: the payload is not valid base64.

        """
        text = self.payload if limit is None else self.payload[: limit - limit % 4]
        try:
            # strict_mode: only the base64 alphabet and correct padding, without the
            # regular expression b64decode(validate=True) runs first (5x slower).
            return binascii.a2b_base64(text, strict_mode=True)
        except ValueError as exc:  # binascii.Error, or text that is not ASCII
            raise ValueError(f"not valid base64 ({exc})") from None


def parse_data_url(url: str) -> DataURL | None:
    """Split a base64 data URL (``data:image/png;base64,...``); None when ``url`` is not one."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    return DataURL(match.group(1).strip().lower(), url[match.end() :])


def image_size(url: str) -> tuple[int, int] | None:
    """Width and height of the image in a data URL, from its header; None when unknown.

    Unknown: a remote URL (never fetched), a payload that is not base64, or a
    header ``imagesize`` cannot read.
    """
    parsed = parse_data_url(url)
    if parsed is None:
        return None
    try:
        size = _header_size(parsed.decode(_HEADER_CHARS))
        if size is None and len(parsed.payload) > _HEADER_CHARS:
            # A JPEG's size can sit after large metadata: read the whole image.
            size = _header_size(parsed.decode())
    except ValueError:
        return None
    return size


def describe(image: object) -> str:
    """A short line for people about an ``image_url`` value: never the image data itself.

    ``[image: image/png, 1024x1024, 12 KiB, detail high]`` for a data URL,
    ``[image: https://example.com/a.png]`` for a remote one.
    """
    url = str(image.get("url", "")) if isinstance(image, dict) else str(image or "")
    detail = image.get("detail") if isinstance(image, dict) else None
    parsed = parse_data_url(url)
    if parsed is None:
        facts = [url[:120] + ("..." if len(url) > 120 else "")]
    else:
        size = image_size(url)
        facts = [parsed.media_type]
        if size is not None:
            facts.append(f"{size[0]}x{size[1]}")
        facts.append(f"{max(1, len(parsed.payload) * 3 // 4 // 1024)} KiB")
    if detail:
        facts.append(f"detail {detail}")
    return f"[image: {', '.join(facts)}]"


def readable(content: object) -> str:
    """Message content for people: text as it is, list content with images described."""
    if not isinstance(content, list):
        return "" if content is None else str(content)
    pieces = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image_url":
            pieces.append(describe(part.get("image_url")))
        elif kind == "text":
            pieces.append(str(part.get("text", "")))
    return join_texts(pieces)


def _header_size(data: bytes) -> tuple[int, int] | None:
    import imagesize  # 60 ms to import: only when an image is counted

    try:
        width, height = imagesize.get(io.BytesIO(data))
    except (ValueError, OSError, IndexError, KeyError):
        return None
    if width <= 0 or height <= 0:
        return None
    return int(width), int(height)
