"""Inline media as sessions store it: base64 text, measured without decoding it.

An agent stores an image or a PDF in a message as the base64 of its file (a JSON string,
or a `data:` URL). What providers refuse is told by its size and, for an image, its
pixel dimensions: those are read from the PNG, JPEG, GIF or WebP header, decoding only
the few bytes of the header that hold them (a JPEG's are found by jumping from segment
to segment, decoding each segment's marker and length alone).
"""

from __future__ import annotations

import binascii
import re
from typing import Final

import msgspec
import xxhash
from msgspec import Raw

_QUOTE: Final = ord('"')
_ESCAPE: Final = re.compile(rb"\\")
"""What a JSON string holds where its raw bytes are not its text."""
_DATA_URL: Final = re.compile(rb"data:[^,]{0,200},")
_JPEG_FRAMES: Final = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)
"""Start-of-frame markers: the segment that holds a JPEG's height and width."""
_JPEG_SEGMENTS: Final = 256
"""How many segments a JPEG header is searched through for its frame."""


def base64_text(raw: bytes | memoryview | Raw) -> memoryview | None:
    """The base64 text a JSON string (its raw bytes, quotes included) holds, a `data:`
    URL's prefix left out, without a copy where it needs no unescaping; None when the
    value is no string."""
    view = memoryview(raw)
    if len(view) > 1 and view[0] == view[-1] == _QUOTE and _ESCAPE.search(view) is None:
        text = view[1:-1]
    else:
        try:
            value = msgspec.json.decode(view)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, str):
            return None
        text = memoryview(value.encode("utf-8", "surrogatepass"))
    if bytes(text[:5]) == b"data:":
        prefix = _DATA_URL.match(text)
        if prefix is not None:
            text = text[prefix.end() :]
    return text


def digest(text: bytes | memoryview | str) -> int:
    """What tells one base64 text from another (xxh3-64; a `data:` URL's prefix left
    out of a `str`)."""
    if isinstance(text, str):
        data = text.encode("utf-8", "surrogatepass")
        if data.startswith(b"data:"):
            prefix = _DATA_URL.match(data)
            if prefix is not None:
                data = data[prefix.end() :]
        return xxhash.xxh3_64_intdigest(data)
    return xxhash.xxh3_64_intdigest(text)


def decoded_size(text: bytes | memoryview) -> int:
    """The bytes base64 `text` decodes to (padding taken off)."""
    tail = bytes(text[-2:])
    padding = len(tail) - len(tail.rstrip(b"="))
    return max(0, len(text) // 4 * 3 - padding)


class _Reader:
    """Decoded bytes of base64 text, read at any offset by decoding only the four-character
    groups that hold them."""

    __slots__ = ("text",)

    def __init__(self, text: bytes | memoryview) -> None:
        self.text = text

    def read(self, offset: int, length: int) -> bytes | None:
        """`length` decoded bytes from `offset`; None past the end or on text that is
        not base64."""
        first = offset // 3 * 4
        last = (offset + length + 2) // 3 * 4
        if last > len(self.text):
            return None
        try:
            chunk = binascii.a2b_base64(self.text[first:last], strict_mode=True)
        except binascii.Error:
            return None
        skip = offset % 3
        found = chunk[skip : skip + length]
        return found if len(found) == length else None


def image_size(text: bytes | memoryview) -> tuple[int, int] | None:
    """(width, height) in pixels of the PNG, JPEG, GIF or WebP image that base64 `text`
    encodes, read from its header; None for any other data or a header that does not
    say."""
    reader = _Reader(text)
    head = reader.read(0, 30) or reader.read(0, 12)
    if head is None:
        return None
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR" and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(reader)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        return _webp_size(head)
    return None


def _jpeg_size(reader: _Reader) -> tuple[int, int] | None:
    """The frame size of a JPEG: segments are walked by their lengths from the start
    of image to the first start-of-frame segment."""
    offset = 2
    for _ in range(_JPEG_SEGMENTS):
        marker = reader.read(offset, 4)
        if marker is None or marker[0] != 0xFF:
            return None
        kind = marker[1]
        if kind == 0xFF:  # fill byte before a marker
            offset += 1
            continue
        if kind in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            offset += 2
            continue
        if kind in _JPEG_FRAMES:
            frame = reader.read(offset + 5, 4)
            if frame is None:
                return None
            height = int.from_bytes(frame[0:2], "big")
            width = int.from_bytes(frame[2:4], "big")
            return (width, height) if width and height else None
        if kind in (0xD9, 0xDA):  # end of image, or scan data before any frame
            return None
        offset += 2 + int.from_bytes(marker[2:4], "big")
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(head[26:28], "little") & 0x3FFF
        height = int.from_bytes(head[28:30], "little") & 0x3FFF
        return width, height
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return width, height
    return None
