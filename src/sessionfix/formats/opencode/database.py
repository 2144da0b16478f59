"""Reading an opencode database (`opencode.db`, opencode 1.2 and later): its sessions,
and each one's message and part rows in the order opencode loads them.

Only ever through a read-only connection (`mode=ro`): nothing is written, no checkpoint
is run, and in WAL mode a running opencode is neither blocked nor waited for. A listing
and the reads of one session each happen in one read transaction, a consistent snapshot
of the database. Rows are read by column name, `data` as bytes (`CAST(... AS BLOB)`);
decoding them is `decode`'s business.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final, NamedTuple

import apsw

from sessionfix.errors import InputError
from sessionfix.read.sqlite import (
    connect_read_only,
    error_reason,
    holds_schema,
    is_hot_journal,
    quoted,
)

KIND: Final = "opencode database"
KNOWN_MIGRATION: Final = "20260622202450_simplify_session_input"
"""The newest schema change sessionfix knows, opencode 1.18.33's (`migration.id`). A
database a newer build migrated may keep a session otherwise; an older one (fewer
migrations, or drizzle's `__drizzle_migrations` of 1.2 to 1.x) is read by column name."""
REQUIRED_COLUMNS: Final = {
    "session": ("id", "parent_id", "directory", "title", "version", "time_created"),
    "message": ("id", "session_id", "time_created", "data"),
    "part": ("id", "message_id", "session_id", "data"),
}
"""The tables and columns a session is read from (spec formats/opencode.md §2)."""
V2_TABLES: Final = ("session_message", "session_context_epoch", "session_input")
"""Tables of opencode 2's own session format (spec §5): a session with rows in any of
them is one 1.x does not read, and sessionfix leaves alone."""


class SessionRow(NamedTuple):
    """A row of `session`: what names and places a session."""

    id: str
    parent_id: str | None
    """The session a sub-agent's session was started from."""
    directory: str
    title: str
    version: str
    time_created: int


class MessageRow(NamedTuple):
    """A row of `message`; `data` is the message info less `id` and `sessionID`."""

    id: str
    session_id: str
    time_created: int | float
    """Milliseconds: an integer as opencode writes it, or with a fraction (a REAL that
    SQLite keeps where a row was written so, ordered by its value)."""
    data: bytes


class PartRow(NamedTuple):
    """A row of `part`; `data` is the part less `id`, `sessionID` and `messageID`."""

    id: str
    message_id: str
    session_id: str
    data: bytes


class StoredMessage(NamedTuple):
    """A message and its parts, in opencode's order (parts by id)."""

    row: MessageRow
    parts: tuple[PartRow, ...]


def _text(value: object) -> str:
    """A text column read as bytes, as opencode reads it (invalid UTF-8 replaced)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else b""


def _integer(value: object) -> int:
    return value if isinstance(value, int) else 0


def sort_time(value: object) -> int | float | None:
    """A `time_created` as the number SQLite orders it by; None for a value that is no
    finite number (NULL, which sorts before every number; text or a blob, after)."""
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return None


def _unplaced(path: Path, session_id: str, message_id: str, value: object) -> InputError:
    """A message no time places (`sort_time` None): opencode loads it before (NULL) or
    after (text, a blob, even after the messages it writes later) every other one."""
    kind = {type(None): "NULL", str: "text", bytes: "a blob"}.get(type(value), "no number")
    where = "before" if value is None else "after"
    return InputError(
        f"{path}: session {session_id}: message {message_id}'s time_created is {kind}, not "
        f"a time: opencode loads it {where} every other message; nothing read of the session"
    )


def is_opencode_database(path: Path) -> bool | None:
    """Whether an SQLite file has opencode's session tables; None when it cannot be read
    to tell."""
    return holds_schema(
        path, lambda db: all(db.table_exists("main", table) for table in REQUIRED_COLUMNS)
    )


class OpencodeDatabase:
    """An opencode database, read through one read-only connection."""

    kind: Final = KIND

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = connect_read_only(path)
        except apsw.Error as exc:
            raise InputError(f"{path}: cannot read the {KIND} ({error_reason(exc)})") from None
        try:
            problem = self._schema_problem()
        except apsw.Error as exc:
            self._db.close()
            if is_hot_journal(exc):
                raise InputError(
                    f"{path}: the {KIND} has a hot journal (a write to it was cut short); "
                    "start opencode or open it with sqlite3 first, which rolls the write back"
                ) from None
            what = (
                "not an"
                if isinstance(exc, (apsw.SQLError, apsw.NotADBError))
                else ("cannot read the")
            )
            raise InputError(f"{path}: {what} {KIND} ({error_reason(exc)})") from None
        if problem is not None:
            self._db.close()
            raise InputError(f"{path}: {problem}; nothing read")
        self._events = self._db.table_exists("main", "event")
        self._v2_tables = tuple(
            table for table in V2_TABLES if self._db.table_exists("main", table)
        )
        """The tables of opencode 2's format this database has (older ones have none)."""

    def _schema_problem(self) -> str | None:
        """Why the database is not one sessionfix can read as opencode's, or None."""
        tables = {
            str(name)
            for (name,) in self._db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
        }
        missing_tables = [table for table in REQUIRED_COLUMNS if table not in tables]
        if missing_tables:
            return f"not an {KIND} (no table {', '.join(missing_tables)})"
        for table, required in REQUIRED_COLUMNS.items():
            columns = {
                str(row[1]) for row in self._db.execute(f"PRAGMA table_info({quoted(table)})")
            }
            absent = [column for column in required if column not in columns]
            if absent:
                return f"not an {KIND} (table {table} has no column {', '.join(absent)})"
        if "migration" in tables:
            newest = self._db.execute("SELECT max(id) FROM migration").fetchone()
            last = newest[0] if newest is not None else None
            if isinstance(last, str) and last > KNOWN_MIGRATION:
                return (
                    f"the {KIND} has a schema newer than opencode 1.18.33's (migration {last}); "
                    "its rows could be read wrong"
                )
        return None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> OpencodeDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _snapshot(self, what: str) -> Iterator[apsw.Connection]:
        """One read transaction (in WAL mode a consistent snapshot); a read that fails
        is one clear error."""
        try:
            with self._db:
                yield self._db
        except apsw.Error as exc:
            raise InputError(f"{self.path}: cannot read {what} ({error_reason(exc)})") from None

    def sessions(self) -> list[SessionRow]:
        """Every session, oldest first (as `opencode session list` lists them, reversed)."""
        with self._snapshot("its sessions") as db:
            rows = db.execute(
                "SELECT CAST(id AS BLOB), CAST(parent_id AS BLOB), CAST(directory AS BLOB), "
                "CAST(title AS BLOB), CAST(version AS BLOB), time_created "
                "FROM session ORDER BY time_created, id"
            ).fetchall()
        return [
            SessionRow(
                _text(sid),
                _text(parent) if parent is not None else None,
                _text(directory),
                _text(title),
                _text(version),
                _integer(created),
            )
            for sid, parent, directory, title, version, created in rows
        ]

    def is_v2(self, session_id: str) -> bool:
        """Whether the session has rows of opencode 2's format (spec §5)."""
        with self._snapshot(f"session {session_id}") as db:
            return any(
                db.execute(
                    f"SELECT 1 FROM {quoted(table)} WHERE session_id = ? LIMIT 1", (session_id,)
                ).fetchone()
                is not None
                for table in self._v2_tables
            )

    def event_bytes(self, session_id: str) -> int | None:
        """Bytes of the session's rows in the `event` log (None: the database keeps no
        log). Counted as SQLite stores them (`octet_length` reads no row's text)."""
        if not self._events:
            return None
        with self._snapshot(f"session {session_id}'s events") as db:
            total = db.execute(
                "SELECT total(octet_length(data)) FROM event WHERE aggregate_id = ?",
                (session_id,),
            ).fetchone()
        return int(total[0]) if total is not None and total[0] is not None else 0

    def messages(self, session_id: str) -> Iterator[StoredMessage]:
        """The session's messages by `time_created`, then id, each with its parts by id:
        opencode's load order (spec §4.1). Parts are found by their message, as opencode
        finds them, whatever session their own column names."""
        with self._snapshot(f"session {session_id}") as db:
            messages = db.execute(
                "SELECT CAST(id AS BLOB), time_created, CAST(data AS BLOB) FROM message "
                "WHERE session_id = ? ORDER BY time_created, id",
                (session_id,),
            )
            parts = db.cursor()
            for message_id, created, data in messages:
                time = sort_time(created)
                if time is None:
                    raise _unplaced(self.path, session_id, _text(message_id), created)
                row = MessageRow(_text(message_id), session_id, time, _bytes(data))
                found = parts.execute(
                    "SELECT CAST(id AS BLOB), CAST(session_id AS BLOB), CAST(data AS BLOB) "
                    "FROM part WHERE message_id = CAST(? AS TEXT) ORDER BY id",
                    (message_id,),
                )
                yield StoredMessage(
                    row,
                    tuple(
                        PartRow(_text(part_id), row.id, _text(owner), _bytes(part_data))
                        for part_id, owner, part_data in found
                    ),
                )
