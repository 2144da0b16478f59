"""Sizes are printed in one system, binary (KiB, MiB), by the summaries, the rules'
messages and the progress bar alike."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from sessionfix import cli
from sessionfix.units import human_bytes

SIZE = 327_100_000
"""312.0 MiB, or "327.1 MB" in decimal units."""
DECIMAL_UNIT = re.compile(r"\d (?:kB|KB|MB|GB|TB)\b")


def test_human_bytes_is_binary() -> None:
    assert human_bytes(SIZE) == "311.9 MiB"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(12) == "12 B"


def test_the_progress_bar_uses_binary_units(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanning bar's size and speed are in MiB, as the summary after it."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200, color_system=None)
    monkeypatch.setattr(cli, "_stderr_console", lambda: console)
    with cli._progress(True, SIZE) as advance:
        assert advance is not None
        advance(SIZE // 2)
        time.sleep(0.3)
        advance(SIZE // 4)
        time.sleep(0.3)
    shown = screen.getvalue()
    assert "MiB" in shown
    assert "MiB/s" in shown
    assert "/311.9 MiB" in shown
    assert not DECIMAL_UNIT.search(shown), shown
