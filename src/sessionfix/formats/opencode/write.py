"""Writing a repair into an opencode database (spec formats/opencode.md §9): row changes
of one session in one transaction, a backup of the session's rows beside the database
first, and putting a backup back.

A database is written only while no other connection has it open: through one
connection that holds it exclusively from the first check to the close (`liveness`),
so that nothing can change between what is checked, what is backed up and what is
written. Only a database the reader accepts is written (opencode's schema, no newer
migration, no hot journal), and only one a change cannot harm unseen: the one foreign
key into `message` or `part` is opencode's own (a part goes with its message, `ON
DELETE CASCADE`), and no trigger is on `session`, `message` or `part` (opencode has
none; an unknown one could write elsewhere when it fires).

In the write transaction (`BEGIN IMMEDIATE`) the session's rows are read again, as the
reader reads them, and must be those the changes were made from (`session_digest`);
each statement must change exactly one row of the session; before the commit the
session's rows are read back and must be the rows before with the changes made, no
part of the session may be left without its message, and any failure rolls everything
back. Columns no change names keep their values (`time_updated` included), other
sessions' rows and the tables no change names (`event`, `todo`, ...) are not touched.
The commit runs with the run's signals held; once it may have been made, the backup
stays whatever follows. A checkpoint then moves the commit into the database file.

The backup is a new SQLite file beside the database,
`<database>.sessionfix-<session id>-<n>.bak` (`n` the first number free; never an
existing file), holding the session's `session` row and its `message` and `part` rows
with every column as stored, in tables made from the database's own definitions, and a
`meta` table saying what it holds. It is written, and synced to the disk, before the
write transaction begins. Restoring it replaces only that session's rows, so sessions
opencode wrote since are not rolled back.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import apsw
import orjson
import xxhash

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.escapes import escape_surrogates
from sessionfix.formats.opencode.database import (
    KIND,
    MessageRow,
    OpencodeDatabase,
    PartRow,
    StoredMessage,
    sort_time,
)
from sessionfix.formats.opencode.liveness import hold_exclusively
from sessionfix.formats.sqlite_writes import (
    HeldRewrite,
    backups_beside,
    checkpoint,
    close_quietly,
    id_in_file_name,
    kill_point,
    new_backup_file,
    newest_first,
    read_backup,
    settled,
    sync_to_disk,
)
from sessionfix.read.sqlite import (
    connect_read_only,
    database_uri,
    error_reason,
    quoted,
    read_only_uri,
)
from sessionfix.stores import StoreBackup, StoreRefused, chosen_backup
from sessionfix.version import __version__

BACKUP_MARK: Final = ".sessionfix-"
BACKUP_SUFFIX: Final = ".bak"
_TABLES: Final = ("session", "message", "part")
"""The tables a backup holds rows of (a session's), in the order they are put back."""
_CASCADE: Final = ("part", "message_id", "message", "id")
"""opencode's one foreign key into the tables a write changes: (table, column, parent
table, parent column); a part goes with its message (`ON DELETE CASCADE`)."""
_BACKUP: Final = "sessionfix_backup"
_RESTORED: Final = "sessionfix_restored"
"""The names a backup being written, and one being restored, are attached under."""


class UpdatePart(NamedTuple):
    """Give a part of the session new `data` (compact JSON, as opencode writes it)."""

    id: str
    data: bytes


class UpdateMessage(NamedTuple):
    """Give a message of the session new `data` and `time_created` (the info's
    `time.created`, which opencode keeps equal to the column)."""

    id: str
    data: bytes
    time_created: int | float


class DeleteMessage(NamedTuple):
    """Remove a message of the session; its parts go with it."""

    id: str


RowChange = UpdatePart | UpdateMessage | DeleteMessage


class DatabaseUnsafe(StoreRefused):
    """The database is not one a write can be trusted with (a schema the reader does not
    read, a foreign key or trigger sessionfix does not know, a hot journal): nothing was
    changed."""


class SessionChanged(SessionfixError):
    """The session's rows are not those the changes were made from: nothing was changed."""


class IntegrityFailed(SessionfixError):
    """The database fails SQLite's checks after a committed write."""


def session_digest(messages: Iterable[StoredMessage]) -> str:
    """Of a session's rows as the reader reads them (each message's id, `time_created`
    and `data`, then each of its parts' id and `data`, in opencode's order): equal
    digests, equal rows."""
    digest = xxhash.xxh3_64()
    for message in messages:
        row = message.row
        digest.update(b"m%s\0%s\0%s\0" % (_utf8(row.id), repr(row.time_created).encode(), row.data))
        for part in message.parts:
            digest.update(b"p%s\0%s\0" % (_utf8(part.id), part.data))
    return digest.hexdigest()


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def replace_session(
    path: Path,
    session_id: str,
    expected: str,
    changes: Sequence[RowChange],
    *,
    backup: bool,
    checked: bool = False,
) -> Path | None:
    """Make `changes` to the session's rows in one transaction, if its rows are still
    those whose `session_digest` is `expected`; returns the backup written first (None
    without `backup`). `checked`: the database passed SQLite's checks before an earlier
    write of this run, which need not be run again."""
    where = f"{path} (session {session_id})"
    with _rewriting(path, where, session_id, checked=checked) as rewrite:
        db = rewrite.db
        if backup and _back_up(rewrite, session_id) != expected:
            raise _changed(where)
        kill_point("backed-up")
        rewrite.begin(lambda: session_digest(_stored_messages(db, "main", session_id)), expected)
        kill_point("begun")
        before = _stored_messages(db, "main", session_id)
        if session_digest(before) != expected:
            raise _changed(where)
        _apply(db, session_id, changes, where)
        kill_point("changed")
        _verify(db, session_id, before, changes, where)
        kill_point("before-commit")
        rewrite.commit()
        kill_point("committed")
    return rewrite.kept[0] if rewrite.kept else None


def _changed(where: str) -> SessionChanged:
    return SessionChanged(f"{where}: changed since it was read; nothing changed")


# ---- reading a session's rows as the reader does ---------------------------------------


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _stored_messages(db: apsw.Connection, schema: str, session_id: str) -> list[StoredMessage]:
    """The session's messages and parts in `schema` (the database's, or a backup's),
    read and ordered as `OpencodeDatabase.messages` reads them."""
    messages = db.execute(
        f"SELECT CAST(id AS BLOB), time_created, CAST(data AS BLOB) FROM {schema}.message "
        "WHERE session_id = ? ORDER BY time_created, id",
        (session_id,),
    ).fetchall()
    found = []
    for message_id, created, data in messages:
        row = MessageRow(
            _text(message_id),
            session_id,
            sort_time(created) or 0,
            data if isinstance(data, bytes) else b"",
        )
        parts = db.execute(
            "SELECT CAST(id AS BLOB), CAST(session_id AS BLOB), CAST(data AS BLOB) "
            f"FROM {schema}.part WHERE message_id = CAST(? AS TEXT) ORDER BY id",
            (message_id,),
        )
        found.append(
            StoredMessage(
                row,
                tuple(
                    PartRow(
                        _text(part_id),
                        row.id,
                        _text(owner),
                        part_data if isinstance(part_data, bytes) else b"",
                    )
                    for part_id, owner, part_data in parts
                ),
            )
        )
    return found


_Contents = dict[str, tuple[int | float, bytes, dict[str, bytes]]]
"""A session's rows by message id: `time_created`, `data`, and its parts' `data` by id."""


def _contents(messages: Iterable[StoredMessage]) -> _Contents:
    return {
        m.row.id: (m.row.time_created, m.row.data, {p.id: p.data for p in m.parts})
        for m in messages
    }


def _changed_contents(before: Sequence[StoredMessage], changes: Sequence[RowChange]) -> _Contents:
    """The session's rows as the changes, made in order, leave them."""
    contents = _contents(before)
    owner = {part.id: message.row.id for message in before for part in message.parts}
    for change in changes:
        if isinstance(change, UpdatePart):
            message = contents.get(owner.get(change.id, ""))
            if message is not None:
                message[2][change.id] = change.data
        elif isinstance(change, UpdateMessage):
            if change.id in contents:
                contents[change.id] = (change.time_created, change.data, contents[change.id][2])
        else:
            contents.pop(change.id, None)
    return contents


# ---- the write -------------------------------------------------------------------------

_UPDATE_PART: Final = (
    "UPDATE main.part SET data = CAST(? AS TEXT) WHERE id = ? "
    "AND message_id IN (SELECT id FROM main.message WHERE session_id = ?)"
)
_UPDATE_MESSAGE: Final = (
    "UPDATE main.message SET data = CAST(? AS TEXT), time_created = ? "
    "WHERE id = ? AND session_id = ?"
)
_DELETE_MESSAGE: Final = "DELETE FROM main.message WHERE id = ? AND session_id = ?"


def _apply(db: apsw.Connection, session_id: str, changes: Sequence[RowChange], where: str) -> None:
    """Run each change's statement; one that does not change exactly one row of the
    session ends the write (its row is gone, or not the session's)."""
    for change in changes:
        if isinstance(change, UpdatePart):
            db.execute(_UPDATE_PART, (change.data, change.id, session_id))
            what = f"part {change.id}"
        elif isinstance(change, UpdateMessage):
            db.execute(_UPDATE_MESSAGE, (change.data, change.time_created, change.id, session_id))
            what = f"message {change.id}"
        else:
            db.execute(_DELETE_MESSAGE, (change.id, session_id))
            what = f"message {change.id}"
        if db.changes() != 1:
            raise SessionfixError(f"{where}: {what} is not one of the session's; nothing changed")


def _verify(
    db: apsw.Connection,
    session_id: str,
    before: Sequence[StoredMessage],
    changes: Sequence[RowChange],
    where: str,
) -> None:
    """The session's rows, read back, are those before with the changes made, and no
    part is left without its message."""
    if _contents(_stored_messages(db, "main", session_id)) != _changed_contents(before, changes):
        raise SessionfixError(f"{where}: the rows written differ from the changes; nothing changed")
    deleted = [change.id for change in changes if isinstance(change, DeleteMessage)]
    _check_orphans(db, session_id, deleted, where)


def _check_orphans(
    db: apsw.Connection, session_id: str, deleted: Sequence[str], where: str
) -> None:
    """No part of the session, nor of a message removed, is left without its message:
    the foreign key check of the rows a write touched (a whole-table check would
    read every part of every session, and fail on damage elsewhere)."""
    orphan = db.execute(
        "SELECT id FROM main.part AS p WHERE session_id = ? AND NOT EXISTS "
        "(SELECT 1 FROM main.message AS m WHERE m.id = p.message_id) LIMIT 1",
        (session_id,),
    ).fetchone()
    for message_id in deleted:
        if orphan is not None:
            break
        orphan = db.execute(
            "SELECT id FROM main.part WHERE message_id = ? LIMIT 1", (message_id,)
        ).fetchone()
    if orphan is not None:
        raise SessionfixError(
            f"{where}: part {_text(orphan[0])} would be left without its message; nothing changed"
        )


@contextmanager
def _rewriting(
    path: Path, where: str, session_id: str | None, *, checked: bool = False
) -> Iterator[HeldRewrite]:
    """The database at `path` held exclusively for a write, once it passes the reader's
    checks (and, given `session_id`, that session is not opencode 2's), a writer's and,
    unless `checked`, SQLite's own (`_integrity_problem`);
    on leaving, the write is checkpointed into the database file and the database let
    go. A failure before the commit may have been made rolls back and removes the
    backups; a failed statement is one line naming `where`."""
    real = Path(os.path.realpath(path))
    version = _reader_checks(path, where, session_id)
    db = hold_exclusively(real, path)
    try:
        rewrite = HeldRewrite(db, real, where)
        with settled(db, rewrite, where, KIND):
            _check_writable(db, version, where)
            if not checked:
                _check_sound(db, where)
            kill_point("held")
            yield rewrite
        checkpoint(db)
        kill_point("checkpointed")
    finally:
        close_quietly(db)


def _reader_checks(path: Path, where: str, session_id: str | None) -> int:
    """Refuse what the reader refuses (a schema it does not read, a newer migration, a
    hot journal) and, given `session_id`, a session of opencode 2; returns the schema
    version these checks were made on (`PRAGMA schema_version`, read before them), to
    be found unchanged once the database is held."""
    try:
        db = connect_read_only(path)
        try:
            version = _one(db, "PRAGMA schema_version")
        finally:
            close_quietly(db)
    except apsw.Error:
        version = None  # the reader says why
    try:
        with OpencodeDatabase(path) as reader:
            v2 = session_id is not None and reader.is_v2(session_id)
    except InputError as exc:
        raise DatabaseUnsafe(str(exc)) from None
    if not isinstance(version, int):
        raise SessionfixError(f"{path}: cannot read the {KIND}; nothing changed")
    if v2:
        raise SessionfixError(
            f"{where}: a session of opencode 2's own format, which sessionfix does not "
            "write; nothing changed"
        )
    return version


def _check_writable(db: apsw.Connection, version: int, where: str) -> None:
    """Refuse (`DatabaseUnsafe`) a database a write could harm unseen."""
    if _one(db, "PRAGMA main.schema_version") != version:
        raise DatabaseUnsafe(
            f"{where}: the database's schema changed as it was checked; nothing changed"
        )
    if db.execute("PRAGMA foreign_keys").fetchone() != (1,):
        raise DatabaseUnsafe(
            f"{where}: this SQLite does not enforce foreign keys, which the write needs; "
            "nothing changed"
        )
    if _one(db, "PRAGMA main.encoding") != "UTF-8":
        raise DatabaseUnsafe(f"{where}: the database's text is not UTF-8; nothing changed")
    cascades = False
    for table, column, parent, key, on_delete in db.execute(
        'SELECT m.name, f."from", f."table", coalesce(f."to", \'id\'), f.on_delete '
        "FROM main.sqlite_schema AS m, pragma_foreign_key_list(m.name) AS f "
        "WHERE m.type = 'table'"
    ).fetchall():
        reference = tuple(str(name).lower() for name in (table, column, parent, key))
        target, target_key = reference[2:]
        if reference == _CASCADE:
            cascades = str(on_delete).upper() == "CASCADE"
        elif target in ("message", "part") or (target == "session" and target_key != "id"):
            raise DatabaseUnsafe(
                f"{where}: table {table} refers to {parent} by a foreign key sessionfix does "
                "not know, so a write could delete or change its rows; nothing changed"
            )
    if not cascades:
        raise DatabaseUnsafe(
            f"{where}: the database's parts do not go with their message (no foreign key "
            "ON DELETE CASCADE), so a message removed would leave its parts; nothing changed"
        )
    trigger = db.execute(
        "SELECT name, tbl_name FROM main.sqlite_schema WHERE type = 'trigger' "
        "AND lower(tbl_name) IN ('session', 'message', 'part') LIMIT 1"
    ).fetchone()
    if trigger is not None:
        raise DatabaseUnsafe(
            f"{where}: trigger {trigger[0]} on {trigger[1]} is not opencode's (it has none), "
            "and could write elsewhere when the session is written; nothing changed"
        )


def _check_sound(db: apsw.Connection, where: str) -> None:
    """Refuse (`DatabaseUnsafe`) a database that already fails SQLite's checks: a write
    into damaged pages could damage it further, and would then be found broken after
    its commit."""
    problem = _integrity_problem(db)
    if problem is not None:
        raise DatabaseUnsafe(
            f"{where}: the database fails SQLite's checks ({problem}), so sessionfix does "
            "not write it; nothing changed"
        )


def _integrity_problem(db: apsw.Connection) -> str | None:
    """The first problem `PRAGMA integrity_check` finds in the database, or the foreign
    key check of the tables a write changes; None when both pass."""
    for (found,) in db.execute("PRAGMA main.integrity_check"):
        for line in str(found).splitlines():
            if line != "ok" and not line.startswith("*** "):
                return line
    for table in _TABLES:
        broken = db.execute(f"PRAGMA main.foreign_key_check({table})").fetchone()
        if broken is not None:
            return f"a row of {table} refers to no row of {broken[2]}"
    return None


def _one(db: apsw.Connection, query: str, bindings: tuple[Any, ...] = ()) -> Any:
    """The single value a query returns (None for no row)."""
    row = db.execute(query, bindings).fetchone()
    return None if row is None else row[0]


# ---- after a run's writes ----------------------------------------------------------------


def check_integrity(path: Path, where: str, backups: Sequence[Path]) -> None:
    """Run `PRAGMA integrity_check` on the whole database, and the foreign key check of
    the tables a write changes, after a run's writes (`backups`: what they kept, named
    should a check fail). A read-only connection in WAL mode (as opencode keeps its
    database) blocks no writer; in rollback-journal mode it would hold opencode off for
    the length of the scan, and the check is left to `sqlite3 DATABASE 'PRAGMA
    integrity_check'`."""
    try:
        db = connect_read_only(path)
    except apsw.Error as exc:
        raise _check_failed(where, error_reason(exc), backups) from None
    try:
        if _one(db, "PRAGMA journal_mode") != "wal":
            return
        problem = _integrity_problem(db)
        if problem is not None:
            raise _check_failed(where, problem, backups)
    except apsw.Error as exc:
        raise _check_failed(where, error_reason(exc), backups) from None
    finally:
        close_quietly(db)


def _check_failed(where: str, problem: str, backups: Sequence[Path]) -> IntegrityFailed:
    kept = f"; the rows it replaced are in {', '.join(map(str, backups))}" if backups else ""
    return IntegrityFailed(
        f"{where}: written, but the database then failed SQLite's checks ({problem}){kept}"
    )


# ---- backups ---------------------------------------------------------------------------


def _back_up(rewrite: HeldRewrite, session_id: str) -> str:
    """Write a backup of the session's rows; returns their `session_digest`."""
    path, digest = _write_backup(rewrite.db, rewrite.real, session_id, rewrite.where)
    rewrite.kept.append(path)
    return digest


def _new_backup_file(real: Path, session_id: str) -> Path:
    """A new empty file beside the database, named for the session and the first number
    free."""
    stem = f"{real.name}{BACKUP_MARK}{id_in_file_name(session_id)}-"
    return new_backup_file(real, stem, BACKUP_SUFFIX)


def _columns(db: apsw.Connection, schema: str) -> dict[str, list[str]]:
    """The columns of each backed-up table in `schema`, as it defines them."""
    return {
        table: [str(row[1]) for row in db.execute(f"PRAGMA {schema}.table_info({table})")]
        for table in _TABLES
    }


def _selections(schema: str) -> dict[str, str]:
    """`FROM ... WHERE ...` of a session's rows of each backed-up table in `schema`
    (the session id bound once): its parts are those of its messages."""
    return {
        "session": f"FROM {schema}.session WHERE id = ?",
        "message": f"FROM {schema}.message WHERE session_id = ?",
        "part": f"FROM {schema}.part WHERE message_id IN "
        f"(SELECT id FROM {schema}.message WHERE session_id = ?)",
    }


def _rows_digest(
    db: apsw.Connection, schema: str, session_id: str, columns: dict[str, list[str]]
) -> str:
    """Of the session's rows in `schema`, every value of `columns` by its type and bytes
    as stored (text that is not UTF-8 included), rows by id."""
    digest = xxhash.xxh3_64()
    for table, selection in _selections(schema).items():
        digest.update(table.encode() + b"\0")
        values = ", ".join(f"typeof({name}), hex({name})" for name in map(quoted, columns[table]))
        for row in db.execute(f"SELECT {values} {selection} ORDER BY id", (session_id,)):
            digest.update(orjson.dumps(row))
    return digest.hexdigest()


def _write_backup(db: apsw.Connection, real: Path, session_id: str, where: str) -> tuple[Path, str]:
    """Copy the session's rows, every column as stored, into a new backup file beside the
    database, synced to the disk; returns it and the `session_digest` of what it holds.
    The rows are copied by SQLite through `db`, the connection that holds the database,
    into the backup attached to it, whose tables are made from the database's own
    definitions."""
    try:
        path = _new_backup_file(real, session_id)
    except OSError as exc:
        raise SessionfixError(
            f"{where}: cannot write a backup beside the database ({described(exc)}); "
            "nothing changed"
        ) from None
    try:
        definitions = [
            _one(
                db,
                "SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ? "
                "COLLATE NOCASE",
                (table,),
            )
            for table in _TABLES
        ]
        made = apsw.Connection(
            database_uri(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI
        )
        try:
            with made:
                for definition in definitions:
                    made.execute(str(definition))
                made.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        finally:
            made.close()
        digest = _copy_rows(db, real, path, session_id)
        sync_to_disk(path)
    except BaseException as exc:
        with suppress(OSError):
            path.unlink()
        if isinstance(exc, (apsw.Error, OSError)):
            reason = error_reason(exc) if isinstance(exc, apsw.Error) else described(exc)
            raise SessionfixError(
                f"{where}: cannot write a backup beside the database ({reason}); nothing changed"
            ) from None
        raise
    return path, digest


def _copy_rows(db: apsw.Connection, real: Path, path: Path, session_id: str) -> str:
    """Copy the session's rows into the backup at `path` with what `meta` says of them;
    returns their `session_digest`. Foreign keys are not enforced meanwhile: the backup's
    tables refer to tables it does not hold (`project`)."""
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute(f"ATTACH ? AS {_BACKUP}", (database_uri(path),))
    try:
        db.execute(f"PRAGMA {_BACKUP}.locking_mode = NORMAL").fetchall()
        db.execute(f"PRAGMA {_BACKUP}.synchronous = FULL")
        columns = _columns(db, _BACKUP)
        with db:
            for table, selection in _selections("main").items():
                names = ", ".join(map(quoted, columns[table]))
                db.execute(
                    f"INSERT INTO {_BACKUP}.{table} ({names}) SELECT {names} {selection} "
                    "ORDER BY id",
                    (session_id,),
                )
            kill_point("backup")
            stored = _stored_messages(db, _BACKUP, session_id)
            digest = session_digest(stored)
            parts = sum(len(message.parts) for message in stored)
            db.executemany(
                f"INSERT INTO {_BACKUP}.meta VALUES (?, ?)",
                [
                    ("sessionfix", __version__),
                    ("taken", datetime.now(UTC).isoformat()),
                    ("session_id", session_id),
                    ("database", escape_surrogates(str(real))),
                    ("digest", digest),
                    ("rows_digest", _rows_digest(db, _BACKUP, session_id, columns)),
                    ("sessions", str(_one(db, f"SELECT count(*) FROM {_BACKUP}.session"))),
                    ("messages", str(len(stored))),
                    ("parts", str(parts)),
                ],
            )
    finally:
        db.execute(f"DETACH {_BACKUP}")
        db.execute("PRAGMA foreign_keys = ON")
    return digest


def list_backups(path: Path, session_id: str | None) -> list[StoreBackup]:
    """The backups beside the database (of one session, or all), newest first, each
    checked: `ok` when it holds the rows its `meta` records, else `damaged` (a backup cut
    short included)."""
    found: list[tuple[str, int, StoreBackup]] = []
    for backup, named in backups_beside(path, BACKUP_MARK, BACKUP_SUFFIX):
        stem, _, number = named.rpartition("-")
        if not number.isdigit():
            continue
        meta, status = read_backup(backup, _holds_recorded_rows)
        held = meta.get("session_id")
        if session_id is not None and (
            held != session_id if held is not None else stem != id_in_file_name(session_id)
        ):
            continue
        counts = [meta.get(key, "") for key in ("sessions", "messages", "parts")]
        rows = sum(int(count) for count in counts if count.isdigit())
        taken = meta.get("taken", "")
        found.append((taken, int(number), StoreBackup(backup, held or "", taken, rows, status)))
    return newest_first(found)


def _holds_recorded_rows(db: apsw.Connection, meta: dict[str, str]) -> bool:
    session_id = meta["session_id"]
    columns = _columns(db, "main")
    counts = [
        str(_one(db, f"SELECT count(*) {selection}", (session_id,)))
        for selection in _selections("main").values()
    ]
    recorded = [meta.get(key) for key in ("sessions", "messages", "parts")]
    digest = _rows_digest(db, "main", session_id, columns)
    return recorded == counts and meta.get("rows_digest") == digest


def restore_session(path: Path, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
    """Put the session's rows back as a backup holds them (the newest intact one, or the
    one named `backup`), in one transaction; with `keep_current`, back up the rows it
    replaces first. Returns the backup restored."""
    chosen = chosen_backup(list_backups(path, session_id), path, session_id, backup)
    where = f"{path} (session {session_id})"
    with _rewriting(path, where, None) as rewrite:
        db = rewrite.db
        if keep_current:
            _back_up(rewrite, session_id)
        try:
            db.execute(f"ATTACH ? AS {_RESTORED}", (read_only_uri(chosen.path),))
        except apsw.Error as exc:
            raise SessionfixError(
                f"{where}: cannot read the backup {chosen.path} ({error_reason(exc)}); "
                "nothing changed"
            ) from None
        columns = _restorable_columns(db, where)
        recorded = _one(db, f"SELECT value FROM {_RESTORED}.meta WHERE key = 'rows_digest'")
        rewrite.begin(lambda: _rows_digest(db, "main", session_id, columns))
        kill_point("restore-begun")
        _put_back(db, session_id, columns, where)
        kill_point("restore-changed")
        if _rows_digest(db, "main", session_id, columns) != recorded:
            raise SessionfixError(
                f"{where}: the rows put back differ from the backup's; nothing changed"
            )
        _check_orphans(db, session_id, (), where)
        rewrite.commit()
    check_integrity(rewrite.real, where, rewrite.kept)
    return chosen.path


def _restorable_columns(db: apsw.Connection, where: str) -> dict[str, list[str]]:
    """The backup's columns, each a column of the database too (one the database has
    and the backup has not takes its default)."""
    held = _columns(db, _RESTORED)
    present = _columns(db, "main")
    for table in _TABLES:
        if not held[table]:
            raise SessionfixError(f"{where}: the backup has no table {table}; not restored")
        lost = [name for name in held[table] if name not in present[table]]
        if lost:
            raise SessionfixError(
                f"{where}: the backup holds column {lost[0]} of {table}, which the database "
                "does not; not restored"
            )
    return held


def _put_back(
    db: apsw.Connection, session_id: str, columns: dict[str, list[str]], where: str
) -> None:
    """Replace the session's rows by the backup's: its messages removed (their parts
    go with them), the session row updated in place (removing it would remove its
    todos and shares too), the backup's messages and parts inserted as they are."""
    saved = _selections(_RESTORED)
    db.execute("DELETE FROM main.message WHERE session_id = ?", (session_id,))
    for table in ("message", "part"):
        taken = db.execute(
            f"SELECT CAST(id AS BLOB), CAST(session_id AS BLOB) FROM main.{table} "
            f"WHERE id IN (SELECT id {saved[table]}) LIMIT 1",
            (session_id,),
        ).fetchone()
        if taken is not None:
            raise SessionfixError(
                f"{where}: {table} {_text(taken[0])} of the backup is now in session "
                f"{_text(taken[1])}; not restored, nothing changed"
            )
    kept = ", ".join(quoted(name) for name in columns["session"] if name.lower() != "id")
    if _one(db, "SELECT 1 FROM main.session WHERE id = ?", (session_id,)) is not None:
        db.execute(
            f"UPDATE main.session SET ({kept}) = (SELECT {kept} {saved['session']}) WHERE id = ?",
            (session_id, session_id),
        )
        tables: tuple[str, ...] = ("message", "part")
    else:
        tables = _TABLES
    for table in tables:
        names = ", ".join(map(quoted, columns[table]))
        db.execute(
            f"INSERT INTO main.{table} ({names}) SELECT {names} {saved[table]} ORDER BY id",
            (session_id,),
        )
