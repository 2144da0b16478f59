"""Inline media measured from their base64 text: size, and pixel dimensions read from the
PNG, JPEG, GIF and WebP headers without decoding more than the header bytes."""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionfix import media
from sessionfix.media import base64_text, decoded_size, digest, image_size


def png(width: int, height: int) -> bytes:
    """A PNG file of these dimensions (its pixels are not what its header says: only the
    header is read)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunks = b""
    for kind, body in ((b"IHDR", header), (b"IDAT", zlib.compress(b"\0" * 16)), (b"IEND", b"")):
        chunks += struct.pack(">I", len(body)) + kind + body
        chunks += struct.pack(">I", zlib.crc32(kind + body))
    return b"\x89PNG\r\n\x1a\n" + chunks


def jpeg(width: int, height: int, app_segments: int = 1, app_size: int = 200) -> bytes:
    """A JPEG whose frame comes after `app_segments` application segments (EXIF, ICC
    profiles) of `app_size` bytes each, and a fill byte."""
    segment = b"\xff\xe1" + struct.pack(">H", app_size) + b"E" * (app_size - 2)
    frame = b"\xff\xc2" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00" * 3
    scan = b"\xff\xda" + struct.pack(">H", 12) + b"\0" * 10 + b"pixels" * 50
    return b"\xff\xd8" + segment * app_segments + b"\xff" + frame + scan + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x80\x00\x00" + b"\0" * 30


def webp_lossy(width: int, height: int) -> bytes:
    body = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\0" * 20
    return (
        b"RIFF"
        + struct.pack("<I", len(body) + 12)
        + b"WEBPVP8 "
        + struct.pack("<I", len(body))
        + body
    )


def webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    body = b"\x2f" + struct.pack("<I", bits) + b"\0" * 20
    return (
        b"RIFF"
        + struct.pack("<I", len(body) + 12)
        + b"WEBPVP8L"
        + struct.pack("<I", len(body))
        + body
    )


def webp_extended(width: int, height: int) -> bytes:
    body = b"\0" * 4 + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return (
        b"RIFF"
        + struct.pack("<I", len(body) + 12)
        + b"WEBPVP8X"
        + struct.pack("<I", len(body))
        + body
    )


def stored(data: bytes) -> bytes:
    """The JSON string a session stores a file's base64 as."""
    return b'"' + base64.b64encode(data) + b'"'


MAKERS: list[Callable[[int, int], bytes]] = [
    png,
    jpeg,
    gif,
    webp_lossy,
    webp_lossless,
    webp_extended,
]


@pytest.mark.parametrize("make", MAKERS, ids=lambda make: make.__name__)
def test_the_dimensions_are_read_from_the_header(make: Callable[[int, int], bytes]) -> None:
    text = base64_text(stored(make(3024, 4032)))
    assert text is not None
    assert image_size(text) == (3024, 4032)


@given(
    st.sampled_from(MAKERS),
    st.integers(min_value=1, max_value=16383),
    st.integers(min_value=1, max_value=16383),
)
def test_any_dimensions_are_read_back(
    make: Callable[[int, int], bytes], width: int, height: int
) -> None:
    text = base64_text(stored(make(width, height)))
    assert text is not None
    assert image_size(text) == (width, height)


@given(st.binary(max_size=64))
def test_the_size_is_what_the_text_decodes_to(data: bytes) -> None:
    text = base64_text(stored(data))
    assert text is not None
    assert decoded_size(text) == len(data)
    assert len(text) == len(base64.b64encode(data))


def test_a_jpeg_frame_is_found_past_large_segments_by_decoding_their_headers_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three 60 KB segments before the frame: each is skipped by its length, and no more
    than a few bytes are decoded at each step."""
    decoded: list[int] = []
    original = binascii.a2b_base64

    def counting(data: bytes, *, strict_mode: bool = False) -> bytes:
        decoded.append(len(data))
        return original(data, strict_mode=strict_mode)

    monkeypatch.setattr(media.binascii, "a2b_base64", counting)
    text = base64_text(stored(jpeg(8001, 6000, app_segments=3, app_size=60_000)))
    assert text is not None
    assert image_size(text) == (8001, 6000)
    assert max(decoded) <= 40
    assert sum(decoded) < 200


def test_a_data_url_and_escaped_slashes_are_read() -> None:
    data = png(9000, 10)
    url = b'"data:image/png;base64,' + base64.b64encode(data) + b'"'
    escaped = stored(data).replace(b"/", b"\\/")
    for raw in (url, escaped):
        text = base64_text(raw)
        assert text is not None
        assert image_size(text) == (9000, 10)
        assert digest(text) == digest(base64.b64encode(data).decode())
    assert digest("data:image/png;base64," + base64.b64encode(data).decode()) == digest(
        base64.b64encode(data)
    )


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\0\0\0",
        b"not an image at all, just text",
        png(5, 5)[:20],
        jpeg(5, 5)[:40],
        b"\xff\xd8\xff\xda" + b"\0" * 40,
        b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 30,
    ],
    ids=["empty", "zeros", "text", "cut-png", "cut-jpeg", "scan-first", "bad-webp"],
)
def test_data_that_says_no_size_gives_none(data: bytes) -> None:
    text = base64_text(stored(data))
    assert text is not None
    assert image_size(text) is None


def test_text_that_is_not_base64_gives_no_size() -> None:
    assert image_size(b"iVBOR!!!not base64 at all, not at all") is None
    assert base64_text(b"123") is None
    assert base64_text(b'"unterminated') is None
