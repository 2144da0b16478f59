"""Writing a repair into open-webui's `webui.db` (spec formats/open-webui.md §9): one
chat's changes in one `BEGIN IMMEDIATE` transaction, a backup of the chat's rows beside
the database first, and putting a backup back.

The database is written only while no other connection has it open (a running
open-webui keeps connections to it: `sqlite_liveness`), and only one the reader reads.
In the transaction the chat is read again and must be what the changes were made from
(`chat_digest`): its document (`chat.chat`) gets the changed messages and `currentId`,
`chat.current_message_id` follows `currentId`, a changed parent goes into the message's
`chat_message` row too, and a dropped compression summary deletes the filter's
`chat_summary` row; before the commit the chat must read back as the repaired transcript.
Messages are never deleted, `updated_at` is left alone, and no other chat, nor
`shared_chat`, is touched. The document is written as open-webui's default JSON codec
writes it (`database.open_webui_json`).

The backup is a new SQLite file beside the database,
`<database>.sessionfix-<chat id>-<n>.bak`, holding the chat's `chat` row, its
`chat_message` rows and its `chat_summary` row with every column as stored, in tables made
from the database's own definitions, and a `meta` table saying what it holds. Restoring it
replaces only that chat's rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import apsw
import orjson
import xxhash

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.escapes import escape_surrogates
from sessionfix.formats import sqlite_liveness
from sessionfix.formats.openwebui.database import (
    KIND,
    SUMMARY_TABLE,
    StoredChat,
    WebuiDatabase,
    open_webui_json,
    open_webui_loads,
)
from sessionfix.formats.openwebui.transcript import chat_digest, lines
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
    database_uri,
    error_reason,
    quoted,
    read_only_uri,
)
from sessionfix.stores import StoreBackup, chosen_backup
from sessionfix.version import __version__

BACKUP_MARK: Final = ".sessionfix-"
BACKUP_SUFFIX: Final = ".bak"
_TABLES: Final = ("chat", "chat_message", SUMMARY_TABLE)
_BACKUP: Final = "sessionfix_backup"
_RESTORED: Final = "sessionfix_restored"
UNCHANGED: Final = object()


class ChatChanges(NamedTuple):
    """What a repair changes of one chat."""

    messages: Mapping[str, dict[str, Any]]
    """Message id → its new copy in the document."""
    parents: Mapping[str, str | None]
    """Message id → the new `parent_id` of its row."""
    current: object
    """The new `currentId` (`UNCHANGED`: as it is)."""
    drop_summary: bool
    lines: bytes
    """The chat's transcript as the repair left it: what the chat must read as once
    written, before the commit."""


class OpenwebuiRunning(sqlite_liveness.AgentRunning):
    """Another process has the database open (open-webui, as a rule): nothing changed."""


class ChatChanged(SessionfixError):
    """The chat is not what the changes were made from."""


def _one(db: apsw.Connection, query: str, bindings: tuple[Any, ...] = ()) -> Any:
    row = db.execute(query, bindings).fetchone()
    return None if row is None else row[0]


def _held_chat(db: apsw.Connection, path: Path, chat_id: str) -> StoredChat | None:
    """The chat as the connection that holds the database reads it."""
    with _reader(path, db) as reader:
        return reader.chat(chat_id, in_transaction=True)


@contextmanager
def _reader(path: Path, db: apsw.Connection | None = None) -> Iterator[WebuiDatabase]:
    try:
        reader = WebuiDatabase(path, db)
    except InputError as exc:
        raise SessionfixError(f"{exc}; nothing changed") from None
    try:
        yield reader
    finally:
        reader.close()


def replace_chat(
    path: Path, chat_id: str, expected: str, changes: ChatChanges, *, backup: bool
) -> Path | None:
    """Make `changes` to the chat in one transaction, if it is still the chat whose
    `chat_digest` is `expected`; returns the backup written first (None without
    `backup`)."""
    where = f"{path} (chat {chat_id})"
    with _rewriting(path, where) as rewrite:
        db = rewrite.db
        if backup:
            _back_up(rewrite, chat_id)
        kill_point("backed-up")
        rewrite.begin(lambda: _rows_digest(db, "main", chat_id))
        chat = _held_chat(db, path, chat_id)
        if chat is None or chat_digest(chat) != expected:
            raise ChatChanged(f"{where}: changed since it was read; nothing changed")
        _apply(db, chat_id, changes, where)
        written = _held_chat(db, path, chat_id)
        if written is None or b"".join(found.line for found in lines(written)) != changes.lines:
            raise SessionfixError(f"{where}: the chat read back is not the repair; nothing changed")
        kill_point("before-commit")
        rewrite.commit()
        kill_point("committed")
    return rewrite.kept[0] if rewrite.kept else None


def _apply(db: apsw.Connection, chat_id: str, changes: ChatChanges, where: str) -> None:
    stored = _one(db, "SELECT CAST(chat AS BLOB) FROM main.chat WHERE id = ?", (chat_id,))
    document = open_webui_loads(stored) if isinstance(stored, bytes) else None
    try:
        orjson.dumps(document)
    except TypeError:
        raise SessionfixError(
            f"{where}: its document holds text that is not valid Unicode (a lone surrogate) "
            "or an integer beyond 64 bits, which sessionfix does not write back; nothing changed"
        ) from None
    history = document.get("history") if isinstance(document, dict) else None
    messages = history.get("messages") if isinstance(history, dict) else None
    if not isinstance(history, dict) or not isinstance(messages, dict):
        raise SessionfixError(f"{where}: its document has no history to write; nothing changed")
    for key, message in changes.messages.items():
        if key not in messages:
            raise SessionfixError(f"{where}: a repair may not add message {key}; nothing changed")
        messages[key] = message
    columns = {str(row[1]) for row in db.execute("PRAGMA main.table_info(chat)")}
    if changes.current is not UNCHANGED:
        history["currentId"] = changes.current
        if "current_message_id" in columns:
            db.execute(
                "UPDATE main.chat SET current_message_id = ? WHERE id = ?",
                (changes.current, chat_id),
            )
    db.execute("UPDATE main.chat SET chat = ? WHERE id = ?", (open_webui_json(document), chat_id))
    for key, parent in changes.parents.items():
        db.execute(
            "UPDATE main.chat_message SET parent_id = ? WHERE id = ? AND chat_id = ?",
            (parent, f"{chat_id}-{key}", chat_id),
        )
        if db.changes() != 1:
            raise SessionfixError(f"{where}: message {key} has no row to write; nothing changed")
    if changes.drop_summary:
        db.execute(f"DELETE FROM main.{SUMMARY_TABLE} WHERE chat_id = ?", (chat_id,))


@contextmanager
def _rewriting(path: Path, where: str) -> Iterator[HeldRewrite]:
    """The database held exclusively for a write, once the reader reads it; checkpointed
    and let go on leaving. A failure before the commit may have been made rolls back and
    removes the backups."""
    real = Path(os.path.realpath(path))
    with _reader(path):
        pass
    db = sqlite_liveness.hold_exclusively(real, path, "open-webui", running=OpenwebuiRunning)
    try:
        rewrite = HeldRewrite(db, real, where)
        with settled(db, rewrite, where, KIND):
            problem = _integrity_problem(db)
            if problem is not None:
                raise SessionfixError(
                    f"{where}: the database fails SQLite's checks ({problem}), so sessionfix "
                    "does not write it; nothing changed"
                )
            yield rewrite
        checkpoint(db)
    finally:
        close_quietly(db)


def _integrity_problem(db: apsw.Connection) -> str | None:
    for (found,) in db.execute("PRAGMA main.quick_check"):
        for line in str(found).splitlines():
            if line != "ok":
                return line
    return None


# ---- backups ---------------------------------------------------------------------------


def _tables(db: apsw.Connection, schema: str) -> list[str]:
    return [
        table
        for table in _TABLES
        if _one(
            db, f"SELECT 1 FROM {schema}.sqlite_schema WHERE type = 'table' AND name = ?", (table,)
        )
    ]


def _key(table: str) -> str:
    return "id" if table == "chat" else "chat_id"


def _columns(db: apsw.Connection, schema: str, table: str) -> list[str]:
    return [str(row[1]) for row in db.execute(f"PRAGMA {schema}.table_info({table})")]


def _rows_digest(db: apsw.Connection, schema: str, chat_id: str) -> str:
    """Of the chat's rows in `schema`, every value by its type and bytes as stored."""
    digest = xxhash.xxh3_64()
    for table in _tables(db, schema):
        values = ", ".join(
            f"typeof({name}), hex({name})" for name in map(quoted, _columns(db, schema, table))
        )
        rows = db.execute(
            f"SELECT {values} FROM {schema}.{table} WHERE {_key(table)} = ? ORDER BY rowid",
            (chat_id,),
        ).fetchall()
        if rows:
            digest.update(table.encode() + b"\0" + orjson.dumps(rows))
    return digest.hexdigest()


def _back_up(rewrite: HeldRewrite, chat_id: str) -> None:
    """Copy the chat's rows, every column as stored, into a new backup file beside the
    database, synced to the disk, before anything is changed."""
    db, where = rewrite.db, rewrite.where
    stem = f"{rewrite.real.name}{BACKUP_MARK}{id_in_file_name(chat_id)}-"
    try:
        path = new_backup_file(rewrite.real, stem, BACKUP_SUFFIX)
    except OSError as exc:
        raise SessionfixError(
            f"{where}: cannot write a backup beside the database ({described(exc)}); "
            "nothing changed"
        ) from None
    rewrite.kept.append(path)
    tables = _tables(db, "main")
    definitions = [
        _one(db, "SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?", (table,))
        for table in tables
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
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute(f"ATTACH ? AS {_BACKUP}", (database_uri(path),))
    try:
        db.execute(f"PRAGMA {_BACKUP}.locking_mode = NORMAL").fetchall()
        db.execute(f"PRAGMA {_BACKUP}.synchronous = FULL")
        with db:
            for table in tables:
                names = ", ".join(map(quoted, _columns(db, "main", table)))
                db.execute(
                    f"INSERT INTO {_BACKUP}.{table} ({names}) SELECT {names} FROM main.{table} "
                    f"WHERE {_key(table)} = ? ORDER BY rowid",
                    (chat_id,),
                )
            rows = sum(int(_one(db, f"SELECT count(*) FROM {_BACKUP}.{table}")) for table in tables)
            db.executemany(
                f"INSERT INTO {_BACKUP}.meta VALUES (?, ?)",
                [
                    ("sessionfix", __version__),
                    ("taken", datetime.now(UTC).isoformat()),
                    ("chat_id", chat_id),
                    ("database", escape_surrogates(str(rewrite.real))),
                    ("rows", str(rows)),
                    ("rows_digest", _rows_digest(db, _BACKUP, chat_id)),
                ],
            )
    finally:
        db.execute(f"DETACH {_BACKUP}")
        db.execute("PRAGMA foreign_keys = ON")
    sync_to_disk(path)


def list_backups(path: Path, chat_id: str | None) -> list[StoreBackup]:
    """The backups beside the database (of one chat, or all), newest first, each
    checked: `ok` when it holds the rows its `meta` records, else `damaged`."""
    found: list[tuple[str, int, StoreBackup]] = []
    for backup, named in backups_beside(path, BACKUP_MARK, BACKUP_SUFFIX):
        stem, _, number = named.rpartition("-")
        if not number.isdigit():
            continue
        meta, status = read_backup(backup, _holds_recorded_rows)
        held = meta.get("chat_id")
        if chat_id is not None and (
            held != chat_id if held is not None else stem != id_in_file_name(chat_id)
        ):
            continue
        rows = meta.get("rows", "")
        taken = meta.get("taken", "")
        found.append(
            (
                taken,
                int(number),
                StoreBackup(backup, held or "", taken, int(rows) if rows.isdigit() else 0, status),
            )
        )
    return newest_first(found)


def _holds_recorded_rows(db: apsw.Connection, meta: dict[str, str]) -> bool:
    return meta.get("rows_digest") == _rows_digest(db, "main", meta["chat_id"])


def restore_chat(path: Path, chat_id: str, backup: str | None, *, keep_current: bool) -> Path:
    """Put the chat's rows back as a backup holds them (the newest intact one, or the one
    named), in one transaction; with `keep_current`, back up the rows it replaces first."""
    chosen = chosen_backup(list_backups(path, chat_id), path, chat_id, backup)
    where = f"{path} (chat {chat_id})"
    with _rewriting(path, where) as rewrite:
        db = rewrite.db
        if keep_current:
            _back_up(rewrite, chat_id)
        try:
            db.execute(f"ATTACH ? AS {_RESTORED}", (read_only_uri(chosen.path),))
        except apsw.Error as exc:
            raise SessionfixError(
                f"{where}: cannot read the backup {chosen.path} ({error_reason(exc)}); "
                "nothing changed"
            ) from None
        recorded = _one(db, f"SELECT value FROM {_RESTORED}.meta WHERE key = 'rows_digest'")
        rewrite.begin(lambda: _rows_digest(db, "main", chat_id))
        _put_back(db, chat_id, where)
        if _rows_digest(db, "main", chat_id) != recorded:
            raise SessionfixError(
                f"{where}: the rows put back differ from the backup's; nothing changed"
            )
        rewrite.commit()
    return chosen.path


def _put_back(db: apsw.Connection, chat_id: str, where: str) -> None:
    """The chat row updated in place (removing it would remove its tags and files too),
    its messages and the filter's row replaced by the backup's."""
    held = _tables(db, _RESTORED)
    if "chat" not in held:
        raise SessionfixError(f"{where}: the backup holds no chat row; not restored")
    for table in held:
        lost = [
            name
            for name in _columns(db, _RESTORED, table)
            if name not in _columns(db, "main", table)
        ]
        if lost:
            raise SessionfixError(
                f"{where}: the backup holds column {lost[0]} of {table}, which the database "
                "does not; not restored"
            )
    kept = ", ".join(quoted(name) for name in _columns(db, _RESTORED, "chat") if name != "id")
    if _one(db, "SELECT 1 FROM main.chat WHERE id = ?", (chat_id,)) is None:
        raise SessionfixError(f"{where}: the chat is no longer in the database; not restored")
    db.execute(
        f"UPDATE main.chat SET ({kept}) = (SELECT {kept} FROM {_RESTORED}.chat WHERE id = ?) "
        "WHERE id = ?",
        (chat_id, chat_id),
    )
    for table in ("chat_message", SUMMARY_TABLE):
        if table in _tables(db, "main"):
            db.execute(f"DELETE FROM main.{table} WHERE chat_id = ?", (chat_id,))
        if table in held:
            names = ", ".join(map(quoted, _columns(db, _RESTORED, table)))
            db.execute(
                f"INSERT INTO main.{table} ({names}) SELECT {names} FROM {_RESTORED}.{table} "
                "WHERE chat_id = ? ORDER BY rowid",
                (chat_id,),
            )
