"""OpenClaw's SQLite session store (OpenClaw 2026.8.1 and later).

One database per agent, `<state>/agents/<agentId>/agent/openclaw-agent.sqlite`; each row
of `transcript_events` is one line of a pi-format transcript, so a session's rows in
`seq` order are read, checked and repaired as an OpenClaw JSONL session.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from sessionfix.registry import SqliteStore

if TYPE_CHECKING:
    from sessionfix.formats.openclaw_store.store import OpenClawStore

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
CONTAINERS: Final = (SqliteStore(frozenset({"openclaw-agent.sqlite"})),)
"""One database per agent, named so (`<state>/agents/<agentId>/agent/...`)."""


def is_store(path: Path, head: bytes) -> bool:
    """An SQLite database holding OpenClaw's agent schema; or, when the database cannot
    be looked into (an I/O error), one named as OpenClaw names its stores, so that
    opening it says what is wrong."""
    if not head.startswith(SQLITE_MAGIC):
        return False
    from sessionfix.formats.openclaw_store.store import is_agent_store

    found = is_agent_store(path)
    return found if found is not None else path.name in CONTAINERS[0].names


def open_store(path: Path) -> OpenClawStore:
    """The store at `path` (an empty file is an empty database, which is no store)."""
    from sessionfix.formats.openclaw_store.store import OpenClawStore

    return OpenClawStore(path)
