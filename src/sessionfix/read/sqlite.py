"""Opening a SQLite database another program owns, for reading only: by the bytes of
its path, never creating or writing a file, and telling apart the states a read meets
(a hot journal left by a write cut short)."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Final

import apsw

READ_BUSY_MS: Final = 5000
"""How long a read waits for a writer in rollback-journal mode (WAL readers never wait)."""

PROBE_BUSY_MS: Final = 200
"""How long telling a database's kind waits for a writer: each format asks in turn, and a
database whose writer holds it locked is then told by its name and opened once, which
says why it cannot be read (rather than one full wait per format asked)."""


def database_uri(path: Path) -> str:
    """The URI that opens `path`, its bytes percent-encoded as they are: SQLite takes a
    file name as UTF-8 text, which a name that is not UTF-8 cannot be."""
    return "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path)))


def read_only_uri(path: Path) -> str:
    """The URI that opens (or attaches) `path` read-only: no file is created, nothing written."""
    return database_uri(path) + "?mode=ro"


def connect_read_only(path: Path, busy_ms: int | None = None) -> apsw.Connection:
    """A read-only connection (`mode=ro` URI: no file is created, nothing is written, no
    checkpoint is run) that waits `busy_ms` for a writer (`READ_BUSY_MS` unless told)."""
    connection = apsw.Connection(
        read_only_uri(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    connection.set_busy_timeout(READ_BUSY_MS if busy_ms is None else busy_ms)
    return connection


def holds_schema(path: Path, looks: Callable[[apsw.Connection], bool]) -> bool | None:
    """Whether the database at `path` is of the kind `looks` recognises in its schema:
    False when it is no database or not that kind, None when it cannot be read to tell
    (locked by a writer, an I/O error)."""
    try:
        connection = connect_read_only(path, PROBE_BUSY_MS)
    except apsw.Error:
        return None
    try:
        return looks(connection)
    except (apsw.SQLError, apsw.NotADBError):
        return False
    except apsw.Error:
        return None
    finally:
        connection.close()


def is_hot_journal(error: apsw.Error) -> bool:
    """A read-only connection met a hot rollback journal: a write was cut short, and only
    a connection that may write can roll it back."""
    return getattr(error, "extendedresult", None) == apsw.SQLITE_READONLY_ROLLBACK


def quoted(name: str) -> str:
    """An SQL identifier for `name`, whatever it holds."""
    return '"' + name.replace('"', '""') + '"'


def error_reason(error: BaseException) -> str:
    """An apsw error in its own words, without its class name ("database disk image is
    malformed")."""
    kind, _, rest = str(error).partition(": ")
    return rest if rest and kind.endswith("Error") else str(error)
