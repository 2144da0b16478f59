"""The declarations of a format whose files have no session header and whose agent takes
no lock on them (a format package imports them as its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessionfix.errors import SessionfixError
from sessionfix.formats import Format, WriterLock
from sessionfix.model.view import HeaderFacts, SessionView

HEADER_START = None


def header_problems(fmt: Format, header: HeaderFacts, name: str) -> list[str]:
    """No session header: nothing to find wrong with one."""
    return []


def rebuilt_header(
    fmt: Format, view: SessionView, first: object, name: str, cwd: str
) -> dict[str, Any]:
    raise SessionfixError(f"no session header of format {fmt.value} is rebuilt")


def writer_lock(fmt: Format, session: Path) -> WriterLock | None:
    return None
