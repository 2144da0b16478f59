"""What every writer of a session into an SQLite database another program owns shares
(the OpenClaw store's, opencode's): a session id in a backup's file name, a backup made
durable, a connection closed whatever its last checkpoint does, and the points where a
test kills the process to prove that a write cut short leaves the database whole."""

from __future__ import annotations

import hashlib
import os
import re
import signal
from contextlib import suppress
from pathlib import Path
from typing import Final

import apsw

KILL_VARIABLE: Final = "SESSIONFIX_KILL_AT"
_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def kill_point(name: str) -> None:
    """Tests stop the process here (`SESSIONFIX_KILL_AT=<name>`, SIGKILL: nothing is
    cleaned up) to prove that a write cut short at this point leaves the database as it
    was, or wholly written."""
    if os.environ.get(KILL_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def id_in_file_name(session_id: str) -> str:
    """A session id as a piece of a file name: the id when it is a plain name (letters,
    digits, `_`, `-`), else a digest of it."""
    if _PLAIN_NAME.fullmatch(session_id):
        return session_id
    return "session-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def sync_to_disk(path: Path) -> None:
    """Flush a file written beside a database, and its folder's entry for it, to the
    disk: a backup must outlast a crash that follows the write it makes undoable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened (not on every platform)
        return
    try:
        with suppress(OSError):
            os.fsync(folder)
    finally:
        os.close(folder)


def close_quietly(db: apsw.Connection) -> None:
    """Close; a checkpoint that fails on close (a full disk) leaves what was committed
    in the write-ahead log, where SQLite finds it."""
    with suppress(apsw.Error):
        db.close()
