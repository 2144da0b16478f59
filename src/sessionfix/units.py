"""Human-readable quantities for messages and summaries."""

from __future__ import annotations

from typing import Final

BYTES_PER_TOKEN: Final = 4
"""Rough size of a token in JSON session text, for estimates."""


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"
