"""What formats whose messages hold content blocks share: blank text blocks, inline media
measured from their base64 text, and the limits of the provider they are sent to."""

from __future__ import annotations

import re
from typing import Final

from msgspec import Raw

from sessionfix.media import base64_text, decoded_size, digest, image_size
from sessionfix.model.view import InlineMedia, MediaKind, MediaLimits

BLANK_TEXT: Final = re.compile(rb'"(?:[ \t\n\r]|\\[nrtf]|\\u00(?:0[9abcdABCD]|20))*"')
"""A JSON string (its raw bytes, quotes included) that is empty or holds only the
whitespace `String.prototype.trim` and Python's `str.strip` both take off: a text block
the Anthropic API refuses ("text content blocks must be non-empty", "… must contain
non-whitespace text"). Whitespace beyond ASCII is left alone: no report says whether the
API takes it for text."""
EMPTY_TEXT: Final = b'""'

ANTHROPIC_MEDIA_LIMITS: Final = MediaLimits(
    by="Anthropic's API",
    encoded=5 * 1024 * 1024,
    pixels=8000,
    many=20,
    many_pixels=2000,
    request=32 * 1024 * 1024,
)
"""The Messages API's limits: 5 MB of base64 text per image ("image exceeds 5 MB
maximum: 5316852 bytes > 5242880 bytes"), 8000 pixels a side, 2000 in a request of more
than 20 images ("… for many-image requests: 2000 pixels"), 32 MB a request (HTTP 413)."""


def is_blank(text: Raw) -> bool:
    """Whether a text block's raw `text` is empty or whitespace only."""
    return BLANK_TEXT.fullmatch(text) is not None


def is_blank_text(block: object) -> bool:
    """Whether a parsed content block is a text block whose text is empty or whitespace
    only (as `is_blank` tells of its raw text)."""
    if not isinstance(block, dict) or block.get("type") != "text":
        return False
    text = block.get("text")
    return isinstance(text, str) and not text.strip(_BLANK_CHARACTERS)


_BLANK_CHARACTERS: Final = " \t\n\r\f\v"


def inline_media(kind: MediaKind, media_type: object, data: Raw | bytes) -> InlineMedia | None:
    """The facts of a block holding base64 `data` (its raw JSON string); None when the
    data is no base64 text."""
    text = base64_text(data)
    if text is None:
        return None
    size = image_size(text) if kind is MediaKind.IMAGE else None
    return InlineMedia(
        kind=kind,
        media_type=media_type if isinstance(media_type, str) else None,
        encoded=len(text),
        decoded=decoded_size(text),
        width=None if size is None else size[0],
        height=None if size is None else size[1],
        digest=digest(text),
    )


def shortened(text: str, head: int, tail: int, note: str) -> str:
    """`text` cut to its first `head` characters (at least its first line, which states
    a mutation's outcome) and its last `tail`, `note` between them with `{cut}` the
    number of characters cut; `text` itself when cutting would not shorten it."""
    line_end = text.find("\n")
    head = max(head, len(text) if line_end < 0 else line_end + 1)
    end = max(head, len(text) - tail)
    cut = end - head
    if cut <= 0:
        return text
    shorter = text[:head] + note.format(cut=cut) + text[end:]
    return shorter if len(shorter) < len(text) else text
