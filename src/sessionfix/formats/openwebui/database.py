"""Reading open-webui's `webui.db` (spec formats/open-webui.md §1, §2): its chats, each
one's document (`chat.chat`), its `chat_message` rows and the compression filter's
`chat_summary` row.

Only ever through a read-only connection (`mode=ro`): a running open-webui is neither
blocked nor waited for in WAL mode, and nothing is written (open-webui's own reads
backfill rows; sessionfix's never do). Each chat is read in one read transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final, NamedTuple

import apsw
import orjson

from sessionfix.errors import InputError
from sessionfix.read.sqlite import connect_read_only, error_reason, is_hot_journal, quoted

KIND: Final = "open-webui database"
REQUIRED_COLUMNS: Final = {
    "chat": ("id", "chat"),
    "alembic_version": ("version_num",),
}
"""What makes a database open-webui's: its chats' table and alembic's revision table."""
MESSAGE_COLUMNS: Final = (
    "id",
    "role",
    "parent_id",
    "content",
    "output",
    "model_id",
    "files",
    "usage",
    "created_at",
    "context_summary",
    "meta",
)
"""The `chat_message` columns open-webui sends a message from (spec §3.2), in its own
order; a database without `context_summary` or `meta` (older revisions) reads NULL."""
SUMMARY_TABLE: Final = "chat_summary"


class MessageRow(NamedTuple):
    """A `chat_message` row: each column as stored (JSON columns as their text)."""

    id: str
    values: tuple[object, ...]
    """The columns of `MESSAGE_COLUMNS` after `id`, in that order."""


class SummaryRow(NamedTuple):
    """The async-context-compression filter's row for a chat (spec §7)."""

    id: int
    compressed: object
    """`compressed_message_count` as stored."""
    updated_at: object


class StoredChat(NamedTuple):
    id: str
    document: bytes
    """`chat.chat` as stored (JSON text)."""
    current_message_id: object
    """The `current_message_id` column (None where the revision has none)."""
    rows: tuple[MessageRow, ...]
    summary: SummaryRow | None


class ChatRow(NamedTuple):
    id: str
    title: str


def open_webui_json(value: object) -> str:
    """JSON text as open-webui 0.12.4 writes it (its `JSONCodec`, orjson by default:
    compact, UTF-8 as it is, the three line separators escaped; what orjson refuses
    goes through Python's `json`)."""
    try:
        text = orjson.dumps(value).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def is_openwebui_database(path: Path) -> bool | None:
    """Whether an SQLite file has open-webui's chat tables; None when it cannot be read
    to tell."""
    try:
        connection = connect_read_only(path)
    except apsw.Error:
        return None
    try:
        return all(connection.table_exists("main", table) for table in REQUIRED_COLUMNS)
    except (apsw.SQLError, apsw.NotADBError):
        return False
    except apsw.Error:
        return None
    finally:
        connection.close()


class WebuiDatabase:
    """A `webui.db`, read through one read-only connection."""

    kind: Final = KIND

    def __init__(self, path: Path, connection: apsw.Connection | None = None) -> None:
        """Through a new read-only connection, or `connection` (a writer's, which it
        leaves open)."""
        self.path = path
        self._own = connection is None
        try:
            self._db = connect_read_only(path) if connection is None else connection
        except apsw.Error as exc:
            raise InputError(f"{path}: cannot read the {KIND} ({error_reason(exc)})") from None
        try:
            tables = {
                str(name)
                for (name,) in self._db.execute(
                    "SELECT name FROM sqlite_schema WHERE type = 'table'"
                )
            }
            self._columns = {
                table: {
                    str(row[1]) for row in self._db.execute(f"PRAGMA table_info({quoted(table)})")
                }
                for table in ("chat", "chat_message", SUMMARY_TABLE)
                if table in tables
            }
        except apsw.Error as exc:
            self.close()
            if is_hot_journal(exc):
                raise InputError(
                    f"{path}: the {KIND} has a hot journal (a write to it was cut short); "
                    "start open-webui or open it with sqlite3 first, which rolls the write back"
                ) from None
            raise InputError(f"{path}: not an {KIND} ({error_reason(exc)})") from None
        missing = [
            f"{table}.{column}"
            for table, columns in REQUIRED_COLUMNS.items()
            for column in columns
            if table not in tables
            or (table in self._columns and column not in self._columns[table])
        ]
        if missing:
            self.close()
            raise InputError(f"{path}: not an {KIND} (no {', '.join(missing)}); nothing read")

    def close(self) -> None:
        if self._own:
            self._db.close()

    @contextmanager
    def _snapshot(self, in_transaction: bool = False) -> Iterator[apsw.Connection]:
        """One read transaction (or the writer's own, `in_transaction`): what is read in
        it is one state of the database."""
        try:
            if in_transaction:
                yield self._db
                return
            with self._db:
                yield self._db
        except apsw.Error as exc:
            raise InputError(f"{self.path}: cannot read the {KIND} ({error_reason(exc)})") from None

    def chats(self) -> list[ChatRow]:
        """Every chat, oldest first (then by id)."""
        with self._snapshot() as db:
            title = "title" if "title" in self._columns["chat"] else "''"
            order = "created_at, id" if "created_at" in self._columns["chat"] else "id"
            return [
                ChatRow(_text(chat_id), _text(name))
                for chat_id, name in db.execute(f"SELECT id, {title} FROM chat ORDER BY {order}")
            ]

    def chat(self, chat_id: str, *, in_transaction: bool = False) -> StoredChat | None:
        with self._snapshot(in_transaction) as db:
            current = (
                "current_message_id" if "current_message_id" in self._columns["chat"] else "NULL"
            )
            found = db.execute(
                f"SELECT CAST(chat AS BLOB), {current} FROM chat WHERE id = ?", (chat_id,)
            ).fetchone()
            if found is None:
                return None
            document, column = found
            return StoredChat(
                chat_id,
                document if isinstance(document, bytes) else b"",
                column,
                tuple(self._rows(db, chat_id)),
                self._summary(db, chat_id),
            )

    def _rows(self, db: apsw.Connection, chat_id: str) -> Iterator[MessageRow]:
        columns = self._columns.get("chat_message")
        if columns is None:
            return
        selected = ", ".join(name if name in columns else "NULL" for name in MESSAGE_COLUMNS)
        prefix = f"{chat_id}-"
        for row in db.execute(
            f"SELECT {selected} FROM chat_message WHERE chat_id = ? ORDER BY rowid", (chat_id,)
        ):
            key = _text(row[0])
            yield MessageRow(key[len(prefix) :] if key.startswith(prefix) else key, tuple(row[1:]))

    def _summary(self, db: apsw.Connection, chat_id: str) -> SummaryRow | None:
        columns = self._columns.get(SUMMARY_TABLE)
        if columns is None or not {"id", "chat_id", "compressed_message_count"} <= columns:
            return None
        updated = "updated_at" if "updated_at" in columns else "NULL"
        found = db.execute(
            f"SELECT id, compressed_message_count, {updated} FROM {SUMMARY_TABLE} "
            "WHERE chat_id = ?",
            (chat_id,),
        ).fetchone()
        return None if found is None else SummaryRow(int(found[0]), found[1], found[2])
