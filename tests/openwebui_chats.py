"""open-webui chats for tests: `webui.db` files with open-webui 0.12.4's own schema
(`openwebui_loader.created_database`), their chats written as the frontend's document
(`chat.chat`) and, where asked, as the `chat_message` rows open-webui keeps beside it
(one per message, as `ChatMessages.upsert_messages` writes them: id
`<chat id>-<message id>`, JSON columns as JSON text).
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

USER = "user-1"
CREATED = 1_780_000_000
"""Seconds: every test chat was made then; message timestamps count on from it."""


def message(
    message_id: str,
    role: str | None,
    parent: str | None,
    children: Sequence[str] = (),
    *,
    at: int = 0,
    content: Any = "",
    **fields: Any,
) -> dict[str, Any]:
    """One message of a chat's history (`at`: seconds after `CREATED`)."""
    found: dict[str, Any] = {"id": message_id, "parentId": parent, "childrenIds": list(children)}
    if role is not None:
        found["role"] = role
    found.update(content=content, timestamp=CREATED + at, **fields)
    return found


def chain(*turns: tuple[str, str, str]) -> dict[str, dict[str, Any]]:
    """A history of (id, role, content), each message the child of the one before."""
    found: dict[str, dict[str, Any]] = {}
    previous: str | None = None
    for at, (message_id, role, content) in enumerate(turns, start=1):
        found[message_id] = message(message_id, role, previous, at=at, content=content)
        if previous is not None:
            found[previous]["childrenIds"].append(message_id)
        previous = message_id
    return found


PLAIN = chain(
    ("u1", "user", "hi"),
    ("a1", "assistant", "hello"),
    ("u2", "user", "more"),
    ("a2", "assistant", "ok"),
)
"""The clean chat u1 → a1 → u2 → a2 of spec formats/open-webui.md §3."""


def plain() -> dict[str, dict[str, Any]]:
    return copy.deepcopy(PLAIN)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def add_chat(
    database: Path,
    chat_id: str,
    messages: Mapping[str, Mapping[str, Any]],
    current: str | None,
    *,
    rows: bool | Mapping[str, Mapping[str, Any]] = False,
    column: str | None = "same",
) -> None:
    """Write a chat: its document, with `currentId` `current`; its `chat_message` rows
    (`rows`: True for one per message as the document has it, or a map of the messages
    to write as rows); `current_message_id` = `current` unless `column` says otherwise."""
    document = {
        "id": chat_id,
        "title": chat_id,
        "models": ["m1"],
        "history": {"currentId": current, "messages": messages},
    }
    with sqlite3.connect(database) as db:
        db.execute(
            "INSERT INTO chat (id, user_id, title, created_at, updated_at, chat, meta, archived,"
            " pinned, current_message_id) VALUES (?, ?, ?, ?, ?, ?, '{}', 0, 0, ?)",
            (
                chat_id,
                USER,
                chat_id,
                CREATED,
                CREATED,
                json.dumps(document),
                current if column == "same" else column,
            ),
        )
        written = messages if rows is True else (rows or {})
        for message_id, found in written.items():
            db.execute(
                "INSERT INTO chat_message (id, chat_id, user_id, role, parent_id, content, output,"
                " model_id, done, context_summary, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    f"{chat_id}-{message_id}",
                    chat_id,
                    USER,
                    found.get("role", ""),
                    found.get("parentId"),
                    _json(found.get("content", "")),
                    _json(found.get("output")),
                    found.get("model"),
                    True,
                    found.get("contextSummary"),
                    found.get("timestamp"),
                    found.get("timestamp"),
                ),
            )
    db.close()


SUMMARY_TABLE = """CREATE TABLE IF NOT EXISTS chat_summary (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, chat_id VARCHAR(255) NOT NULL UNIQUE,
    summary TEXT NOT NULL, compressed_message_count INTEGER, created_at DATETIME,
    updated_at DATETIME)"""
"""The async-context-compression filter's table, as its model creates it (spec §2)."""


def add_summary(database: Path, chat_id: str, count: int, updated: str, text: str = "s") -> None:
    """The compression filter's row for a chat (`updated`: `YYYY-MM-DD HH:MM:SS`, UTC)."""
    with sqlite3.connect(database) as db:
        db.execute(SUMMARY_TABLE)
        db.execute(
            "INSERT INTO chat_summary (chat_id, summary, compressed_message_count, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?)",
            (chat_id, text, count, updated, updated),
        )
    db.close()
