"""An open-webui chat as lines of text, for the rules to read: first the chat's own line
(its stored `currentId`, `current_message_id`, whether it has `chat_message` rows, the
compression filter's row), then one line per message: the message as the document's
history holds it (`data`, null for one only a row holds) and, where the chat has
rows, as its row reads (`row`). Messages come in the history's order, then those only
a row holds, in row order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, NamedTuple

import msgspec
import orjson
import xxhash

from sessionfix.escapes import escape_surrogates
from sessionfix.formats.openwebui.database import MESSAGE_COLUMNS, StoredChat, open_webui_loads
from sessionfix.formats.openwebui.history import row_message

TABLE: Final = "openwebui"
"""The field that names a line's kind, and tells this format's lines apart."""
CHAT: Final = "chat"
MESSAGE: Final = "message"
JSON_COLUMNS: Final = frozenset({"content", "output", "files", "usage", "meta"})
INT_RANGE: Final = (-(2**63), 2**64 - 1)
"""The integers orjson writes."""


class Envelope(msgspec.Struct, gc=False):
    openwebui: str
    id: str
    data: Any = None
    row: Any = None


ENVELOPE: Final = msgspec.json.Decoder(Envelope)


class ChatFacts(msgspec.Struct, gc=False):
    """What the chat's own line says."""

    current_id: Any = None
    current_message_id: Any = None
    rows: int = 0
    summary_count: Any = None
    summary_updated: Any = None
    unread: str | None = None


def is_envelope(value: dict[str, object]) -> bool:
    return value.get(TABLE) in (CHAT, MESSAGE) and isinstance(value.get("id"), str)


def _column(name: str, value: object) -> object:
    """A `chat_message` column as open-webui reads it: JSON columns decoded."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if name in JSON_COLUMNS and isinstance(value, str):
        try:
            return open_webui_loads(value)
        except ValueError:
            return value
    return value


def _representable(value: Any) -> Any:
    """What open-webui read with Python's `json` that no line can hold, as a line holds it:
    each lone surrogate in text as its escape (`\\ud83d`), an integer beyond 64 bits as
    the float orjson reads it as."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not INT_RANGE[0] <= value <= INT_RANGE[1]
    ):
        return float(value)
    if isinstance(value, list):
        return [_representable(item) for item in value]
    if isinstance(value, dict):
        return {escape_surrogates(str(key)): _representable(item) for key, item in value.items()}
    return value


def _line(record: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(record, default=str) + b"\n"
    except TypeError:
        return orjson.dumps(_representable(record), default=str) + b"\n"


class Line(NamedTuple):
    key: str
    kind: str
    line: bytes


def _document(chat: StoredChat) -> tuple[dict[str, Any], Any, str | None]:
    """The history's messages and `currentId`, or why open-webui reads no history."""
    if chat.unread is not None:
        return {}, None, chat.unread
    try:
        value = open_webui_loads(chat.document) if chat.document else None
    except ValueError:
        return (
            {},
            None,
            "kept in a document (chat.chat) that is not JSON, which open-webui cannot read",
        )
    history = value.get("history") if isinstance(value, dict) else None
    if not isinstance(history, dict):
        if isinstance(value, dict) and isinstance(value.get("messages"), list):
            return (
                {},
                None,
                "kept as a flat list of messages, from before open-webui's history tree: "
                "open-webui sends only what the browser holds of it",
            )
        return {}, None, "kept in a document (chat.chat) without a history: open-webui reads none"
    messages = history.get("messages")
    return (messages if isinstance(messages, dict) else {}), history.get("currentId"), None


def chat_digest(chat: StoredChat) -> str:
    """Of a chat as stored: its document and every line it reads as, to tell later
    whether it changed."""
    digest = xxhash.xxh3_64()
    digest.update(chat.document)
    for found in lines(chat):
        digest.update(found.line)
    return digest.hexdigest()


def lines(chat: StoredChat) -> Iterator[Line]:
    messages, current, unread = _document(chat)
    facts: dict[str, Any] = {
        "current_id": current,
        "current_message_id": chat.current_message_id,
        "rows": len(chat.rows),
    }
    if chat.summary is not None:
        facts["summary_count"] = chat.summary.compressed
        facts["summary_updated"] = chat.summary.updated_at
    if unread is not None:
        facts["unread"] = unread
    yield Line(chat.id, CHAT, _line({TABLE: CHAT, "id": chat.id, "data": facts}))
    rows = {
        row.id: row_message(
            row.id,
            {
                name: _column(name, value)
                for name, value in zip(MESSAGE_COLUMNS[1:], row.values, strict=True)
            },
        )
        for row in chat.rows
    }
    for key, message in messages.items():
        record: dict[str, Any] = {TABLE: MESSAGE, "id": key, "data": message}
        if key in rows:
            record["row"] = rows.pop(key)
        yield Line(key, MESSAGE, _line(record))
    for key, row in rows.items():
        record = {TABLE: MESSAGE, "id": key, "data": None, "row": row}
        yield Line(key, MESSAGE, _line(record))
