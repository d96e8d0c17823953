"""Real, small images for the tests: built with the standard library (PNG) or Pillow."""

from __future__ import annotations

import base64
import io
import struct
import zlib


def png_bytes(width: int, height: int) -> bytes:
    """A valid grey PNG of ``width`` x ``height`` pixels (standard library only)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def data_url(raw: bytes, media_type: str = "image/png") -> str:
    """``raw`` as a base64 data URL."""
    return f"data:{media_type};base64,{base64.b64encode(raw).decode('ascii')}"


def png_url(width: int, height: int) -> str:
    """A PNG data URL of ``width`` x ``height`` pixels."""
    return data_url(png_bytes(width, height))


def pillow_url(width: int, height: int, fmt: str) -> str:
    """A JPEG, GIF or WebP data URL made by Pillow."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 100, 50)).save(buffer, fmt)
    return data_url(buffer.getvalue(), f"image/{fmt.lower()}")


def image_part(url: str, detail: str | None = None) -> dict[str, object]:
    """An OpenAI ``image_url`` content part."""
    image: dict[str, object] = {"url": url}
    if detail is not None:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def png_header_url(width: int, height: int) -> str:
    """A data URL holding only a PNG's signature and header: its size, cheaply, for any size."""
    return data_url(png_bytes(1, 1)[:8] + _ihdr(width, height))


def _ihdr(width: int, height: int) -> bytes:
    data = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = b"IHDR" + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
