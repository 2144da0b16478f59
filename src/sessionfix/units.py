"""Human-readable quantities for messages and summaries, and times as sessions write them."""

from __future__ import annotations

from datetime import datetime
from typing import Final

BYTES_PER_TOKEN: Final = 4
"""Rough size of a token in JSON session text, for estimates."""
IMAGE_TOKENS: Final = 1_600
"""Tokens an inline image is counted as: about what Claude and GPT models charge for an
image at the size they scale larger ones down to (around 1.15 megapixels)."""


def estimated_tokens(text_bytes: int, images: int) -> int:
    """The token estimate of messages of `text_bytes` UTF-8 bytes of JSON besides the
    data of their `images` inline images."""
    return text_bytes // BYTES_PER_TOKEN + images * IMAGE_TOKENS


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def iso_seconds(value: object) -> float | None:
    """An ISO 8601 time as JavaScript's `toISOString()` writes it, in seconds since the
    epoch; None when `value` is not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
