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
from typing import Any, Final, NamedTuple

import apsw
import orjson

from sessionfix.errors import InputError
from sessionfix.escapes import escape_surrogates
from sessionfix.read.sqlite import (
    connect_read_only,
    error_reason,
    holds_schema,
    is_hot_journal,
    quoted,
)

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
KNOWN_HEAD: Final = "0bd252b206fb"
KNOWN_REVISIONS: Final = frozenset(
    [
        "018012973d35",
        "0bd252b206fb",
        "1af9b942657b",
        "1ce6ade7d93b",
        "242a2047eae0",
        "2f1211949ecc",
        "374d2f66af06",
        "3781e22d8b01",
        "37f288994c47",
        "38d63c18f30f",
        "3ab32c4b8f59",
        "3af16a1c9fb6",
        "3c9b0ca343fd",
        "3e0e00844bb0",
        "3ff2c63645b8",
        "42e2978c7933",
        "461111b60977",
        "4ace53fd72c8",
        "4c5ce3d2f27f",
        "4de81c2a3af1",
        "55f1302ac17c",
        "56359461a091",
        "57c599a3cb57",
        "6283dc0e4d8d",
        "6a39f3d8e55c",
        "6d09d1bf1f23",
        "7826ab40b532",
        "7b3f2a9c1d4e",
        "7e5b5dc7342b",
        "81cc2ce44d79",
        "8452d01d26d7",
        "856c5b02fb54",
        "90ef40d4714e",
        "922e7a387820",
        "959eaac8f909",
        "9a1b2c3d4e5f",
        "9f0c9cd09105",
        "a0b1c2d3e4f5",
        "a1b2c3d4e5f6",
        "a3dd5bedd151",
        "a5c220713937",
        "a7d3e9f2b641",
        "af906e964978",
        "b0018471bbbe",
        "b10670c03dd5",
        "b2c3d4e5f6a7",
        "b7c8d9e0f1a2",
        "b8e4f0a3c752",
        "b8f2c6d91a04",
        "c0fbf31ca0db",
        "c1d2e3f4a5b6",
        "c29facfe716b",
        "c440947495f3",
        "c49178636c78",
        "c69f45358db4",
        "c92da83b017f",
        "ca81bd47c050",
        "d31026856c01",
        "d4c1a8e37b62",
        "d4e5f6a7b8c9",
        "d6a8c3f912ab",
        "e1f2a3b4c5d6",
        "e7b9d4a023bc",
        "f0bd01a18a3d",
        "f1e2d3c4b5a6",
        "f8c0e5b134cd",
    ]
)
"""open-webui 0.12.4's alembic revisions (`KNOWN_HEAD` its last): a database at
another was migrated by a newer open-webui, which may keep a chat otherwise (spec §1).
An older one is read by column name."""


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
    unread: str | None = None
    """Why open-webui cannot read the chat at all, where it cannot (its text)."""


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


NOT_TEXT: Final = "stored with text that is not UTF-8 ({}), which open-webui cannot read"
"""Why a chat is unread whose id, rows or current message are not UTF-8: open-webui's
SQLite driver fails on such text."""


def open_webui_loads(text: bytes | str) -> Any:
    """JSON text as open-webui 0.12.4 reads it (its `JSONCodec`): orjson, and what orjson
    refuses through Python's `json` (a `NaN` an older open-webui wrote, a lone surrogate
    escape); `ValueError` for what neither reads."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


LEFT_SUMMARY: Final = (
    "not in the database (deleted, or a temporary chat): only the compression filter's "
    "chat_summary row is left of it, which nothing reads"
)
"""Why a chat id only a `chat_summary` row names is unread (spec §6: dead data)."""


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def is_openwebui_database(path: Path) -> bool | None:
    """Whether an SQLite file has open-webui's chat tables; None when it cannot be read
    to tell."""
    return holds_schema(
        path, lambda db: all(db.table_exists("main", table) for table in REQUIRED_COLUMNS)
    )


class WebuiDatabase:
    """A `webui.db`, read through one read-only connection."""

    kind: Final = KIND

    def __init__(self, path: Path, connection: apsw.Connection | None = None) -> None:
        """Through a new read-only connection, or `connection` (a writer's, which it
        leaves open)."""
        self.path = path
        self._own = connection is None
        self._stored_ids: dict[str, bytes] = {}
        """An id `chats` listed with its bytes escaped (not UTF-8) → its bytes."""
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
            what = (
                "not an"
                if isinstance(exc, (apsw.SQLError, apsw.NotADBError))
                else "cannot read the"
            )
            raise InputError(f"{path}: {what} {KIND} ({error_reason(exc)})") from None
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
        unknown = [revision for revision in self._revisions() if revision not in KNOWN_REVISIONS]
        if unknown:
            self.close()
            raise InputError(
                f"{path}: the {KIND} has a schema newer than open-webui 0.12.4's (alembic "
                f"revision {unknown[0]}), whose chats could be read wrong; nothing read"
            )

    def _revisions(self) -> list[str]:
        """The alembic revisions the database is at (one, as a rule)."""
        try:
            return [
                _text(found)
                for (found,) in self._db.execute("SELECT version_num FROM alembic_version")
            ]
        except apsw.Error as exc:
            self.close()
            raise InputError(f"{self.path}: cannot read the {KIND} ({error_reason(exc)})") from None

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
            found = db.execute(
                f"SELECT CAST(id AS BLOB), CAST({title} AS BLOB) FROM chat ORDER BY {order}"
            ).fetchall()
            if self._summarised():
                found += db.execute(
                    f"SELECT CAST(chat_id AS BLOB), '' FROM {SUMMARY_TABLE} "
                    "WHERE chat_id NOT IN (SELECT id FROM chat) ORDER BY id"
                ).fetchall()
        listed = []
        for stored, name in found:
            chat_id = _text(stored)
            if isinstance(stored, bytes) and chat_id.encode() != stored:
                chat_id = escape_surrogates(stored.decode("utf-8", "surrogateescape"))
                self._stored_ids[chat_id] = stored
            listed.append(ChatRow(chat_id, _text(name)))
        return listed

    def chat(self, chat_id: str, *, in_transaction: bool = False) -> StoredChat | None:
        if chat_id in self._stored_ids:
            return StoredChat(chat_id, b"", None, (), None, NOT_TEXT.format("its id"))
        try:
            return self._chat(chat_id, in_transaction)
        except UnicodeDecodeError:
            return StoredChat(
                chat_id, b"", None, (), None, NOT_TEXT.format("its rows or current message")
            )

    def _chat(self, chat_id: str, in_transaction: bool) -> StoredChat | None:
        with self._snapshot(in_transaction) as db:
            current = (
                "current_message_id" if "current_message_id" in self._columns["chat"] else "NULL"
            )
            found = db.execute(
                f"SELECT CAST(chat AS BLOB), {current} FROM chat WHERE id = ?", (chat_id,)
            ).fetchone()
            if found is None:
                if self._summary(db, chat_id) is None:
                    return None
                return StoredChat(chat_id, b"", None, (), None, LEFT_SUMMARY)
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

    def _summarised(self) -> bool:
        """Whether the database has the compression filter's table, as the filter makes it."""
        columns = self._columns.get(SUMMARY_TABLE)
        return columns is not None and {"id", "chat_id", "compressed_message_count"} <= columns

    def _summary(self, db: apsw.Connection, chat_id: str) -> SummaryRow | None:
        if not self._summarised():
            return None
        updated = "updated_at" if "updated_at" in self._columns[SUMMARY_TABLE] else "NULL"
        found = db.execute(
            f"SELECT id, compressed_message_count, {updated} FROM {SUMMARY_TABLE} "
            "WHERE chat_id = ?",
            (chat_id,),
        ).fetchone()
        return None if found is None else SummaryRow(int(found[0]), found[1], found[2])
