"""Whether another program has an opencode database open: a write is refused while one has.

opencode writes no lock or pid file for its database (spec formats/opencode.md §9.1),
and every opencode process (TUI, `serve`, `run`, the desktop app's sidecar) keeps a
connection to it for its whole life, idle or not: the exclusive-lock probe of
`sqlite_liveness` tells it."""

from __future__ import annotations

from pathlib import Path

import apsw

from sessionfix.formats import sqlite_liveness
from sessionfix.formats.sqlite_liveness import DatabaseBusy, holders

__all__ = ["DatabaseBusy", "OpencodeRunning", "hold_exclusively", "holders"]


class OpencodeRunning(sqlite_liveness.AgentRunning):
    """Another process has the database open (opencode, as a rule): nothing was changed."""


def hold_exclusively(real: Path, shown: Path) -> apsw.Connection:
    """A read-write connection that holds the opencode database at `real` exclusively
    until it is closed (`sqlite_liveness.hold_exclusively`)."""
    return sqlite_liveness.hold_exclusively(real, shown, "opencode", running=OpencodeRunning)
