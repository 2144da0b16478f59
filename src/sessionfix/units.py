"""Human-readable quantities for messages and summaries, and times as sessions write them."""

from __future__ import annotations

from datetime import datetime
from typing import Final

BYTES_PER_TOKEN: Final = 4
"""Rough size of a token in JSON session text, for estimates."""


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
